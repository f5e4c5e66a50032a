/**
 * What a model pack means by its token ids, as comparable text and as a digest: tokenizer.json's token → id
 * map and its added tokens. Routing needs a pair that shares it; the tools compare two packs on this machine
 * directly, and a pack here with a shim's (whose Score replies carry the digest) by the digest.
 *
 * @example
 * vocabularySha256('models/stories260k') === vocabularySha256('models/stories260k-3l'); // true: one tokenizer
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { readJsonFile } from '../model/model-pack.ts';

/** The pack's vocabulary as compact JSON `[vocab, [[id, content], ...]]`. */
export function vocabularyText(packDir: string): string {
  const tokenizer = readJsonFile(join(packDir, 'tokenizer.json')) as {
    model?: { vocab?: unknown };
    added_tokens?: { id: number; content: string }[];
  };
  const added = (tokenizer.added_tokens ?? []).map((t) => [t.id, t.content]);
  return JSON.stringify([tokenizer.model?.vocab ?? null, added]);
}

export function vocabularySha256(packDir: string): string {
  return createHash('sha256').update(vocabularyText(packDir)).digest('hex');
}
