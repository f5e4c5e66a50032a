/**
 * What a model pack means by its token ids, as one digest both sides of the contract compute the same way:
 * the shim reports its pack's (proto `TokenizerFingerprint`, in `Describe` and `SessionOpened`), the edge
 * compares it with its edge model's before it routes a token, and a router pack records the one of the edge
 * model it was trained on (src/edge/routing/edge-model-identity.ts). Read once from the pack's tokenizer.json and
 * tokenizer_config.json.
 *
 * The digest covers five parts, each hashed on its own so that a mismatch can say which ones differ:
 * - `vocabulary`: the model's token → id map (tokenizer.json `model.vocab`), as `[id, token]` by id;
 * - `model`: the rest of `model`: its type, merges (one spelling: `[a, b]` pairs), a Unigram's scores, and settings;
 * - `normalizer`: `normalizer`, `pre_tokenizer`, `post_processor` and `decoder`;
 * - `added_tokens`: `added_tokens` by id, with their flags;
 * - `special_ids`: tokenizer_config.json's bos, eos, pad and unk tokens, as the ids they name.
 * Objects are hashed with their keys sorted, so key order and whitespace do not count; anything that
 * changes how text becomes ids, or which ids are special, does.
 *
 * @example
 * const edge = tokenizerFingerprint('models/stories260k-distilled-1l');
 * edge.sha256 === tokenizerFingerprint('models/stories260k').sha256; // true: one tokenizer
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isRecord } from '../is-record.ts';
import { readJsonFile } from '../model/model-pack.ts';

export const TOKENIZER_PARTS = ['vocabulary', 'model', 'normalizer', 'added_tokens', 'special_ids'] as const;
export type TokenizerPart = (typeof TOKENIZER_PARTS)[number];

/** Which file each part comes from, for messages. */
const PART_FILES: Record<TokenizerPart, string> = {
  vocabulary: 'tokenizer.json',
  model: 'tokenizer.json',
  normalizer: 'tokenizer.json',
  added_tokens: 'tokenizer.json',
  special_ids: 'tokenizer_config.json',
};

export interface TokenizerFingerprint {
  /** SHA-256 (hex) over the parts' digests, in TOKENIZER_PARTS order. */
  sha256: string;
  /** Distinct ids the tokenizer names (vocabulary and added tokens). */
  vocabularySize: number;
  /** Each part's own SHA-256 (hex). */
  parts: Readonly<Record<TokenizerPart, string>>;
}

const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;

/** The fingerprint of the tokenizer in `packDir` (its tokenizer.json; tokenizer_config.json when there is one). */
export function tokenizerFingerprint(packDir: string): TokenizerFingerprint {
  const configPath = join(packDir, 'tokenizer_config.json');
  return fingerprintOf(readJsonFile(join(packDir, 'tokenizer.json')), existsSync(configPath) ? readJsonFile(configPath) : {});
}

/** The fingerprint of parsed tokenizer.json and tokenizer_config.json contents. */
export function fingerprintOf(tokenizerJson: unknown, tokenizerConfig: unknown): TokenizerFingerprint {
  const tokenizer = isRecord(tokenizerJson) ? tokenizerJson : {};
  const model = isRecord(tokenizer.model) ? tokenizer.model : {};
  const vocabulary = vocabularyEntries(model.vocab);
  const added = Array.isArray(tokenizer.added_tokens) ? tokenizer.added_tokens.filter(isRecord) : [];
  const idOf = new Map<string, number>(vocabulary.map(([id, token]) => [token, id]));
  for (const token of added) if (typeof token.content === 'string' && typeof token.id === 'number') idOf.set(token.content, token.id);
  const { vocab, merges, ...settings } = model;
  // A Unigram vocabulary's scores decide how text splits: they belong to the model part.
  const scores = Array.isArray(vocab) ? { scores: vocab.map((entry: unknown) => (Array.isArray(entry) ? entry[1] : null)) } : {};
  const parts: Record<TokenizerPart, string> = {
    vocabulary: sha256(vocabulary),
    model: sha256({ ...settings, ...scores, merges: Array.isArray(merges) ? merges.map(mergePair) : null }),
    normalizer: sha256([tokenizer.normalizer, tokenizer.pre_tokenizer, tokenizer.post_processor, tokenizer.decoder]),
    added_tokens: sha256([...added].sort((a, b) => Number(a.id) - Number(b.id))),
    special_ids: sha256(specialIds(isRecord(tokenizerConfig) ? tokenizerConfig : {}, idOf)),
  };
  const ids = new Set<number>([...idOf.values()]);
  return {
    sha256: createHash('sha256')
      .update(TOKENIZER_PARTS.map((p) => parts[p]).join(':'))
      .digest('hex'),
    vocabularySize: ids.size,
    parts,
  };
}

/** `[id, token]` pairs by id: a BPE/WordPiece map (token → id), or a Unigram list (`[token, score]`, the id is the index). */
function vocabularyEntries(vocab: unknown): [number, string][] {
  if (Array.isArray(vocab)) return vocab.map((entry, id) => [id, String(Array.isArray(entry) ? entry[0] : entry)]);
  if (!isRecord(vocab)) return [];
  return Object.entries(vocab)
    .filter((e): e is [string, number] => typeof e[1] === 'number')
    .map(([token, id]): [number, string] => [id, token])
    .sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1));
}

/** A merge as a pair: tokenizers writes `"a b"` in older files and `["a", "b"]` in newer ones, for the same merge. */
function mergePair(merge: unknown): unknown {
  if (typeof merge !== 'string') return merge;
  const space = merge.indexOf(' ');
  return space < 0 ? [merge] : [merge.slice(0, space), merge.slice(space + 1)];
}

/** tokenizer_config.json's special tokens (a string or `{ content }`) as the ids they name; null where unnamed or unknown. */
function specialIds(config: Record<string, unknown>, idOf: ReadonlyMap<string, number>): Record<string, number | null> {
  const ids: Record<string, number | null> = {};
  for (const key of SPECIAL_TOKEN_KEYS) {
    const value = config[key];
    const content = typeof value === 'string' ? value : isRecord(value) && typeof value.content === 'string' ? value.content : undefined;
    ids[key] = content === undefined ? null : (idOf.get(content) ?? null);
  }
  return ids;
}

function sha256(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

/** JSON with object keys sorted at every depth; `undefined` as null. */
function canonicalJson(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isRecord(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The parts two fingerprints differ in, in TOKENIZER_PARTS order (all of them when either has no parts). */
export function differingParts(a: TokenizerFingerprint, b: TokenizerFingerprint): TokenizerPart[] {
  return TOKENIZER_PARTS.filter((p) => !a.parts[p] || a.parts[p] !== b.parts[p]);
}

/**
 * One line that says two tokenizers differ: who holds each, its size and digest, and the parts (with their
 * files) that differ.
 *
 * @example
 * describeTokenizerMismatch({ name: "the shim's tokenizer", fingerprint: shim }, { name: "the edge model's", fingerprint: edge });
 * // "the shim's tokenizer (vocabulary 151,665 ids, fingerprint ab12cd34ef56) is not the edge model's (512 ids, fingerprint 0a1b2c3d4e5f): they differ in vocabulary, model, ... (tokenizer.json, tokenizer_config.json)"
 */
export function describeTokenizerMismatch(
  a: { name: string; fingerprint: TokenizerFingerprint },
  b: { name: string; fingerprint: TokenizerFingerprint },
): string {
  const parts = differingParts(a.fingerprint, b.fingerprint);
  const files = [...new Set(parts.map((p) => PART_FILES[p]))];
  const shown = (f: TokenizerFingerprint) => `${f.vocabularySize.toLocaleString('en-US')} ids, fingerprint ${f.sha256.slice(0, 12)}`;
  return (
    `${a.name} (vocabulary ${shown(a.fingerprint)}) is not ${b.name} (${shown(b.fingerprint)})` +
    (parts.length ? `: they differ in ${parts.join(', ').replaceAll('_', ' ')} (${files.join(', ')})` : '')
  );
}
