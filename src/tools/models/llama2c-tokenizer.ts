/**
 * llama2.c vocabulary file (`tok512.bin`, `tokenizer.bin`) → Hugging Face `tokenizer.json` +
 * `tokenizer_config.json` that encode exactly like llama2.c's `encode(text, bos, eos)` in run.c.
 *
 * The file is `int32 max_token_length`, then per token `float32 score, int32 byte length, bytes`.
 * llama2.c's export wrote sentencepiece's `▁` as a literal space and BOS/EOS as `"\n<s>\n"`/`"\n</s>\n"`;
 * ids 3..258 are the byte tokens `<0x00>`..`<0xFF>`.
 *
 * @example
 * const { tokenizerJson, tokenizerConfig } = convertLlama2cTokenizer(readFileSync('tok512.bin'), 512);
 */
import { AppError } from '../../shared/errors.ts';

export interface Llama2cVocab {
  /** Token strings exactly as stored (spaces are literal spaces, BOS is `"\n<s>\n"`). */
  pieces: string[];
  scores: number[];
  maxTokenLength: number;
}

/** The subset of the `tokenizer.json` schema this converter writes. */
export interface HfAddedToken {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

export interface HfTokenizerJson {
  version: '1.0';
  truncation: null;
  padding: null;
  added_tokens: HfAddedToken[];
  normalizer: { type: 'Prepend'; prepend: string };
  pre_tokenizer: null;
  post_processor: {
    type: 'TemplateProcessing';
    single: TemplatePiece[];
    pair: TemplatePiece[];
    special_tokens: Record<string, { id: string; ids: number[]; tokens: string[] }>;
  };
  decoder: { type: 'Sequence'; decoders: Array<{ type: 'ByteFallback' } | { type: 'Fuse' } | { type: 'Strip'; content: string; start: number; stop: number }> };
  model: {
    type: 'BPE';
    dropout: null;
    unk_token: string;
    continuing_subword_prefix: null;
    end_of_word_suffix: null;
    fuse_unk: boolean;
    byte_fallback: boolean;
    ignore_merges: boolean;
    vocab: Record<string, number>;
    merges: Array<[string, string]>;
  };
}

type TemplatePiece = { SpecialToken: { id: string; type_id: number } } | { Sequence: { id: 'A' | 'B'; type_id: number } };

export interface HfTokenizerConfig {
  tokenizer_class: 'PreTrainedTokenizerFast';
  bos_token: string;
  eos_token: string;
  unk_token: string;
  add_bos_token: boolean;
  add_eos_token: boolean;
  clean_up_tokenization_spaces: boolean;
  model_max_length: number;
}

export interface ConvertedTokenizer {
  tokenizerJson: HfTokenizerJson;
  tokenizerConfig: HfTokenizerConfig;
  vocabSize: number;
}

const UNK = '<unk>';
const BOS = '<s>';
const EOS = '</s>';
/** How llama2.c's export spelled the three special tokens; the bare spelling is accepted too. */
const STORED_SPECIALS = [[UNK], ['\n<s>\n', BOS], ['\n</s>\n', EOS]] as const;
const BOS_ID = 1;
const FIRST_BYTE_ID = 3;
const FIRST_PIECE_ID = FIRST_BYTE_ID + 256;

function formatError(message: string): AppError {
  return new AppError('INVALID_ARGUMENT', message);
}

function byteToken(byte: number): string {
  return `<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`;
}

/**
 * Parses the llama2.c vocabulary file. Reads tokens until the end of the file (the file does not store
 * the vocabulary size; the checkpoint does). Throws `AppError('INVALID_ARGUMENT')` naming the problem;
 * the caller adds the file name.
 */
export function readLlama2cVocab(bytes: Uint8Array): Llama2cVocab {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  if (bytes.byteLength < 4) throw formatError(`too short for a llama2.c tokenizer header (${bytes.byteLength} bytes, need 4)`);
  const maxTokenLength = view.getInt32(0, true);
  if (maxTokenLength <= 0) throw formatError(`max_token_length is ${maxTokenLength}, expected a positive number`);
  const pieces: string[] = [];
  const scores: number[] = [];
  let offset = 4;
  while (offset < bytes.byteLength) {
    const id = pieces.length;
    if (offset + 8 > bytes.byteLength) {
      throw formatError(`truncated in the header of token ${id} at byte ${offset} (${bytes.byteLength - offset} of 8 bytes left)`);
    }
    const score = view.getFloat32(offset, true);
    const length = view.getInt32(offset + 4, true);
    offset += 8;
    if (!Number.isFinite(score)) throw formatError(`token ${id} has a non-finite score (${score})`);
    if (length <= 0 || length > maxTokenLength) {
      throw formatError(`token ${id} has byte length ${length}, outside 1..max_token_length (${maxTokenLength})`);
    }
    if (offset + length > bytes.byteLength) {
      throw formatError(`truncated in token ${id}: its ${length} bytes run past the end of the file (${bytes.byteLength - offset} left)`);
    }
    let piece: string;
    try {
      piece = utf8.decode(bytes.subarray(offset, offset + length));
    } catch {
      throw formatError(`token ${id} is not valid UTF-8`);
    }
    pieces.push(piece);
    scores.push(score);
    offset += length;
  }
  return { pieces, scores, maxTokenLength };
}

/** Checks the layout the conversion relies on and returns the pieces under their Hugging Face names. */
function hfPieces(vocab: Llama2cVocab): string[] {
  const { pieces } = vocab;
  if (pieces.length < FIRST_PIECE_ID) {
    throw formatError(`has ${pieces.length} tokens; a llama2.c vocabulary has at least ${FIRST_PIECE_ID} (3 special, 256 bytes)`);
  }
  const names = pieces.slice();
  STORED_SPECIALS.forEach((spellings, id) => {
    if (!(spellings as readonly string[]).includes(pieces[id]!)) {
      throw formatError(`token ${id} is ${JSON.stringify(pieces[id])}, expected ${JSON.stringify(spellings[0])}`);
    }
    names[id] = spellings[spellings.length - 1]!;
  });
  for (let byte = 0; byte < 256; byte++) {
    const id = FIRST_BYTE_ID + byte;
    if (pieces[id] !== byteToken(byte)) {
      throw formatError(`token ${id} is ${JSON.stringify(pieces[id])}, expected the byte token ${byteToken(byte)}`);
    }
  }
  const firstId = new Map<string, number>();
  names.forEach((name, id) => {
    const earlier = firstId.get(name);
    if (earlier !== undefined) throw formatError(`tokens ${earlier} and ${id} are both ${JSON.stringify(name)}`);
    firstId.set(name, id);
  });
  // llama2.c looks up " " as the dummy prefix and would emit id -1 without it.
  if (!firstId.has(' ')) throw formatError('has no single-space token, which llama2.c uses as its dummy prefix');
  return names;
}

/**
 * The merges, ranked so that Hugging Face BPE (lowest rank first, leftmost first among equal ranks)
 * replays llama2.c's loop (merge the adjacent pair whose concatenation is the highest-scoring token,
 * leftmost first among equal scores):
 * - every split of every token into two tokens is a merge, because llama2.c merges any pair whose
 *   concatenation is in the vocabulary, whichever way it was built;
 * - ranks follow the merged token's score, highest first; equal scores fall back to token id, then the
 *   ids of the parts (the order transformers' sentencepiece converter uses);
 * - a split with a part that no merge sequence can produce is left out: it can never fire in either.
 * Special tokens are neither merge results nor parts. Two things BPE cannot replay:
 * - different pairs with equal scores adjacent at the same time: llama2.c takes the leftmost, BPE the
 *   lower rank. tok512's scores are distinct, so there this can only be two splits of one token (13
 *   tokens have several, e.g. " the" = " t"+"he" = " th"+"e"); the tests compare every TinyStories
 *   paragraph and 20,000 random strings over those tokens' letters with a transcription of run.c;
 * - a pair whose part is a byte token made by byte fallback (BPE falls back after merging, llama2.c
 *   before); no tok512 token splits into such a part.
 */
function rankedMerges(names: string[], scores: number[]): Array<[string, string]> {
  const idOf = new Map(names.map((name, id) => [name, id] as const));
  const mergeable = (id: number | undefined): id is number => id !== undefined && id >= FIRST_BYTE_ID;
  const splits = names.map((name, id) => {
    const chars = Array.from(name);
    const found: Array<[number, number]> = [];
    if (id < FIRST_BYTE_ID) return found;
    for (let cut = 1; cut < chars.length; cut++) {
      const left = idOf.get(chars.slice(0, cut).join(''));
      const right = idOf.get(chars.slice(cut).join(''));
      if (mergeable(left) && mergeable(right)) found.push([left, right]);
    }
    return found;
  });
  // Single characters come straight from the text; longer tokens only through a split of producible parts.
  const producible = names.map((name, id) => id >= FIRST_BYTE_ID && Array.from(name).length === 1);
  for (let grew = true; grew; ) {
    grew = false;
    splits.forEach((pairs, id) => {
      if (!producible[id] && pairs.some(([l, r]) => producible[l] && producible[r])) producible[id] = grew = true;
    });
  }
  const merges: Array<{ left: number; right: number; merged: number }> = [];
  splits.forEach((pairs, merged) => {
    for (const [left, right] of pairs) if (producible[left] && producible[right]) merges.push({ left, right, merged });
  });
  merges.sort((a, b) => scores[b.merged]! - scores[a.merged]! || a.merged - b.merged || a.left - b.left || a.right - b.right);
  return merges.map(({ left, right }) => [names[left]!, names[right]!]);
}

function addedToken(id: number, content: string): HfAddedToken {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

/**
 * Converts a llama2.c vocabulary file. The tokenizer keeps llama2.c's strings (literal spaces, no `▁`),
 * so text that contains `▁` stays byte-fallback text as it is in llama2.c.
 */
export function convertLlama2cTokenizer(bytes: Uint8Array, modelMaxLength: number): ConvertedTokenizer {
  if (!Number.isInteger(modelMaxLength) || modelMaxLength <= 0) {
    throw formatError(`model_max_length must be a positive integer, got ${modelMaxLength}`);
  }
  const vocab = readLlama2cVocab(bytes);
  const names = hfPieces(vocab);
  const tokenizerJson: HfTokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [addedToken(0, UNK), addedToken(1, BOS), addedToken(2, EOS)],
    // llama2.c's encode adds the " " token in front of any non-empty text (sentencepiece's dummy prefix),
    // even when the text already starts with a space; Prepend does the same and skips empty text.
    normalizer: { type: 'Prepend', prepend: ' ' },
    // llama2.c does not split the text into words: merges may cross anything the vocabulary allows.
    pre_tokenizer: null,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: BOS, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: BOS, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: BOS, type_id: 1 } },
        { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: { [BOS]: { id: BOS, ids: [BOS_ID], tokens: [BOS] } },
    },
    // <0xNN> runs back to UTF-8 text, then the dummy-prefix space comes off the front of the whole text.
    decoder: {
      type: 'Sequence',
      decoders: [{ type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: UNK,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab: Object.fromEntries(names.map((name, id) => [name, id])),
      // Pairs, not "a b" strings: tokens contain literal spaces.
      merges: rankedMerges(names, vocab.scores),
    },
  };
  const tokenizerConfig: HfTokenizerConfig = {
    // The generic fast class uses tokenizer.json as written; LlamaTokenizer(Fast) would rebuild parts of it.
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: BOS,
    eos_token: EOS,
    unk_token: UNK,
    add_bos_token: true,
    add_eos_token: false,
    clean_up_tokenization_spaces: false,
    model_max_length: modelMaxLength,
  };
  return { tokenizerJson, tokenizerConfig, vocabSize: names.length };
}
