/**
 * The one tokenizer of the system: a model pack's `tokenizer.json` + `tokenizer_config.json` run by
 * `@huggingface/tokenizers`, plus an incremental decoder for streaming generated text.
 *
 * @example
 * const tokenizer = await TextTokenizer.fromPack('models/stories260k');
 * const ids = tokenizer.encode('Once upon a time', { addBos: true });
 * const stream = tokenizer.createStreamDecoder();
 * for (const id of generated) process.stdout.write(stream.push(id));
 * process.stdout.write(stream.flush());
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { AppError, errorMessage } from '../errors.ts';
import { readJsonFile } from '../model/model-pack.ts';
import { isRecord } from '../is-record.ts';
import { TokenStreamDecoder, type DecodeOptions } from './token-stream-decoder.ts';

export { TokenStreamDecoder, type DecodeOptions } from './token-stream-decoder.ts';

export interface EncodeOptions {
  /** Put the BOS token first. Defaults to the config's `add_bos_token`. */
  addBos?: boolean;
  /**
   * Whether special-token text such as `<|im_start|>` in `text` becomes its special id (the default, for
   * prompts the system renders itself) or is encoded as ordinary characters (for text a user typed).
   */
  parseSpecialTokens?: boolean;
}

/** A range of a string, in UTF-16 code units, `end` exclusive. */
export interface TextSpan {
  start: number;
  end: number;
}

/** Special-token fields of tokenizer_config.json: a string, an AddedToken object, or null. */
type SpecialTokenField = string | { content: string } | null | undefined;

interface TokenizerConfigFields {
  bos_token?: SpecialTokenField;
  eos_token?: SpecialTokenField;
  add_bos_token?: boolean;
  clean_up_tokenization_spaces?: boolean;
  model_max_length?: number;
  chat_template?: unknown;
}

function specialTokenContent(field: SpecialTokenField): string | undefined {
  if (typeof field === 'string') return field;
  if (isRecord(field) && typeof field.content === 'string') return field.content;
  return undefined;
}

/** The default chat template, kept as data: rendering Jinja is the caller's business. */
function defaultChatTemplate(field: unknown): string | undefined {
  if (typeof field === 'string') return field;
  if (!Array.isArray(field)) return undefined;
  // The list form: [{ name: 'default', template }, { name: 'tool_use', template }...]
  const named = field.find((t): t is { template: string } => isRecord(t) && t.name === 'default' && typeof t.template === 'string');
  return named?.template;
}

/** GPT-2's byte-to-character map (Qwen, Llama 3), SentencePiece's `<0xAB>` byte tokens (Llama 2), or plain text. */
export type VocabularyKind = 'byte_level' | 'byte_fallback' | 'raw';

function vocabularyKindOf(decoder: unknown): VocabularyKind {
  if (!isRecord(decoder)) return 'raw';
  if (decoder.type === 'ByteLevel') return 'byte_level';
  if (decoder.type === 'ByteFallback') return 'byte_fallback';
  if (decoder.type === 'Sequence' && Array.isArray(decoder.decoders)) {
    const kinds = decoder.decoders.map(vocabularyKindOf);
    return kinds.find((k) => k !== 'raw') ?? 'raw';
  }
  return 'raw';
}

/** Decodes of at most this many ids are remembered (TextTokenizer.shortDecodes), and at most this many of them. */
const SHORT_DECODE_IDS = 3;
const SHORT_DECODE_ENTRIES = 1 << 16;

export class TextTokenizer {
  /** One more than the highest id the tokenizer knows (added tokens included). */
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  /** The config's `eos_token`; a pack's generation_config.json may name more stop ids. */
  readonly eosIds: readonly number[];
  /** Special token text → id (BOS, EOS, `<|im_start|>`...). */
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly chatTemplate: string | undefined;
  readonly modelMaxLength: number | undefined;
  private readonly addBosByDefault: boolean;
  private readonly cleanUpSpaces: boolean;
  private readonly specialIds: ReadonlySet<number>;
  /** Every added token's text (special or not), longest first: the strings the library's splitter matches. */
  private readonly addedTexts: readonly string[];
  /**
   * Short decodes already done, by ids and whether special tokens were skipped: a stream decoder decodes the
   * same one- and two-id windows over and over (every token's text, every private-value scan), and the
   * library's decode pipeline costs far more than a lookup. Cleared when full.
   */
  private readonly shortDecodes = new Map<string, string>();

  private constructor(
    private readonly hf: Tokenizer,
    config: TokenizerConfigFields,
    source: string,
    /** How the vocabulary's token strings spell bytes (tokenizer.json's decoder): what a grammar engine needs to read them. */
    readonly vocabularyKind: VocabularyKind = 'raw',
  ) {
    let maxId = -1;
    for (const id of hf.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    const special = new Map<string, number>();
    for (const [id, token] of hf.get_added_tokens_decoder()) if (token.special) special.set(token.content, id);
    this.specialTokens = special;
    this.specialIds = new Set(special.values());
    this.addedTexts = [...hf.get_added_tokens_decoder().values()].map((t) => t.content).sort((a, b) => b.length - a.length);
    const idOfConfigToken = (key: 'bos_token' | 'eos_token'): number | undefined => {
      const content = specialTokenContent(config[key]);
      if (content === undefined) return undefined;
      const id = hf.token_to_id(content);
      if (id === undefined) throw new AppError('INVALID_ARGUMENT', `${source}: ${key} ${JSON.stringify(content)} is not in the vocabulary`);
      return id;
    };
    this.bosId = idOfConfigToken('bos_token');
    const eosId = idOfConfigToken('eos_token');
    this.eosIds = eosId === undefined ? [] : [eosId];
    this.chatTemplate = defaultChatTemplate(config.chat_template);
    this.modelMaxLength = typeof config.model_max_length === 'number' ? config.model_max_length : undefined;
    this.addBosByDefault = config.add_bos_token === true && this.bosId !== undefined;
    // The library's default is true, which rewrites " ." to "." and breaks round trips and streaming.
    this.cleanUpSpaces = config.clean_up_tokenization_spaces === true;
  }

  /**
   * Loads `tokenizer.json` and `tokenizer_config.json` from a model pack folder. A `chat_template.jinja`
   * beside them (where current transformers writes the template) wins over the config's `chat_template`,
   * as it does in transformers.
   */
  static async fromPack(dir: string): Promise<TextTokenizer> {
    const root = resolve(dir);
    const tokenizerJson = readJsonFile(join(root, 'tokenizer.json'));
    const tokenizerConfig = readJsonFile(join(root, 'tokenizer_config.json'));
    const jinja = join(root, 'chat_template.jinja');
    const withTemplate = existsSync(jinja) && isRecord(tokenizerConfig) ? { ...tokenizerConfig, chat_template: readFileSync(jinja, 'utf8') } : tokenizerConfig;
    return TextTokenizer.fromJson(tokenizerJson, withTemplate, root);
  }

  /** Builds a tokenizer from the parsed contents of the two files; `source` names them in errors. */
  static fromJson(tokenizerJson: unknown, tokenizerConfig: unknown, source = 'tokenizer'): TextTokenizer {
    if (!isRecord(tokenizerJson)) throw new AppError('INVALID_ARGUMENT', `${source}: tokenizer.json is not a JSON object`);
    if (!isRecord(tokenizerConfig)) throw new AppError('INVALID_ARGUMENT', `${source}: tokenizer_config.json is not a JSON object`);
    let hf: Tokenizer;
    try {
      hf = new Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (e) {
      throw new AppError('INVALID_ARGUMENT', `${source}: unusable tokenizer.json (${errorMessage(e)})`, { cause: e });
    }
    return new TextTokenizer(hf, tokenizerConfig as TokenizerConfigFields, source, vocabularyKindOf(tokenizerJson.decoder));
  }

  /** Every token's string as the vocabulary spells it (`Ġthe`, `<0x0A>`), indexed by id; '' for an id with none. */
  encodedVocabulary(): string[] {
    const tokens = new Array<string>(this.vocabSize).fill('');
    for (const [token, id] of this.hf.get_vocab(true)) tokens[id] = token;
    return tokens;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const { addBos = this.addBosByDefault, parseSpecialTokens = true } = options;
    return this.withBos(parseSpecialTokens ? this.hf.encode(text, { add_special_tokens: false }).ids : this.encodePlain(text), addBos);
  }

  /** `ids`, after the BOS token when `addBos`. */
  private withBos(ids: number[], addBos: boolean): number[] {
    if (!addBos) return ids;
    if (this.bosId === undefined) throw new AppError('FAILED_PRECONDITION', 'this tokenizer has no BOS token');
    return [this.bosId, ...ids];
  }

  /**
   * `text` with added-token text (`<|im_start|>`, `</s>`...) parsed as those tokens, except inside
   * `asText`: there it is ordinary characters. For a chat prompt, whose template writes the turn markers
   * and whose messages a user typed: a message that contains `<|im_end|>` must not end its own turn.
   * Where no added-token text falls inside `asText`, the ids are `encode(text)`'s.
   */
  encodeWithTextSpans(text: string, asText: readonly TextSpan[], options: Pick<EncodeOptions, 'addBos'> = {}): number[] {
    const markers = this.addedTokenOccurrences(text);
    const inText = (m: TextSpan) => asText.some((span) => m.start < span.end && span.start < m.end);
    if (!markers.some(inText)) return this.encode(text, { ...options, parseSpecialTokens: true });
    // The library's own encoding, section by section: text between the markers kept as tokens goes
    // through normalizer, pre-tokenizer and model with its section's index, as its splitter would.
    const ids: number[] = [];
    let from = 0;
    let section = 0;
    for (const marker of markers.filter((m) => !inText(m))) {
      if (marker.start > from) ids.push(...this.encodePlain(text.slice(from, marker.start), section++));
      ids.push(this.tokenToId(text.slice(marker.start, marker.end))!);
      section++;
      from = marker.end;
    }
    if (from < text.length) ids.push(...this.encodePlain(text.slice(from), section));
    return this.withBos(ids, options.addBos ?? this.addBosByDefault);
  }

  /** Whether `text` holds the text of an added token (special or not), which `encode` would parse. */
  hasAddedTokenText(text: string): boolean {
    return this.addedTexts.some((t) => text.includes(t));
  }

  /** Where added-token text occurs in `text`: leftmost, then longest, without overlaps (as the library splits). */
  private addedTokenOccurrences(text: string): TextSpan[] {
    const found: TextSpan[] = [];
    for (let at = 0; at < text.length; ) {
      const match = this.addedTexts.find((t) => text.startsWith(t, at));
      if (match === undefined) {
        at++;
        continue;
      }
      found.push({ start: at, end: at + match.length });
      at += match.length;
    }
    return found;
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return '';
    const skipSpecialTokens = options.skipSpecialTokens ?? true;
    if (ids.length > SHORT_DECODE_IDS) return this.decodeUncached(ids, skipSpecialTokens);
    const key = `${skipSpecialTokens ? 's' : 'k'}${ids.join(',')}`;
    let text = this.shortDecodes.get(key);
    if (text === undefined) {
      text = this.decodeUncached(ids, skipSpecialTokens);
      if (this.shortDecodes.size >= SHORT_DECODE_ENTRIES) this.shortDecodes.clear();
      this.shortDecodes.set(key, text);
    }
    return text;
  }

  private decodeUncached(ids: readonly number[], skipSpecialTokens: boolean): string {
    for (const id of ids) {
      if (!Number.isInteger(id) || this.hf.id_to_token(id) === undefined) {
        throw new AppError('INVALID_ARGUMENT', `token id ${id} is not in the vocabulary (${this.vocabSize} ids)`);
      }
    }
    return this.hf.decode(ids.slice(), {
      skip_special_tokens: skipSpecialTokens,
      clean_up_tokenization_spaces: this.cleanUpSpaces,
    });
  }

  specialTokenId(content: string): number | undefined {
    return this.specialTokens.get(content);
  }

  isSpecialId(id: number): boolean {
    return this.specialIds.has(id);
  }

  tokenToId(token: string): number | undefined {
    return this.hf.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.hf.id_to_token(id);
  }

  /**
   * A streaming decoder for ids that continue `context` (a prompt's ids): their text is what they add to
   * the context's text, so a first token that starts a new word keeps its space.
   */
  createStreamDecoder(options: DecodeOptions & { context?: readonly number[] } = {}): TokenStreamDecoder {
    return new TokenStreamDecoder(this, options, options.context ?? []);
  }

  /**
   * The library's pipeline without its first step, which cuts special-token text out of the input:
   * normalizer, pre-tokenizer, model. `section` is the text's index among the pieces the library's
   * splitter would have made (a Metaspace pre-tokenizer adds its prefix space to the first only).
   */
  private encodePlain(text: string, section = 0): number[] {
    if (text.length === 0) return [];
    const { normalizer, pre_tokenizer: preTokenizer, model } = this.hf;
    if (model === null) throw new AppError('INTERNAL', 'tokenizer has no model');
    const normalized = normalizer === null ? text : normalizer(text);
    if (normalized.length === 0) return [];
    const words = preTokenizer === null ? [normalized] : preTokenizer(normalized, { section_index: section });
    return model(words).map((token) => {
      const id = model.tokens_to_ids.get(token) ?? model.unk_token_id;
      if (id === undefined) throw new AppError('INTERNAL', `tokenizer produced ${JSON.stringify(token)}, which has no id`);
      return id;
    });
  }
}
