/** logitRows (float-tensors.ts): a view of a step's logits, a copy of a long prompt's. */
import { expect, test } from 'bun:test';
import { logitRows } from '../src/shared/model/float-tensors.ts';
import { ort } from '../src/shared/model/ort.ts';

const VOCAB = 4;
const logits = (positions: number) =>
  new ort.Tensor(
    'float32',
    Float32Array.from({ length: 2 * positions * VOCAB }, (_, i) => i),
    [2, positions, VOCAB],
  );

test('at most two positions a row: the last row of row 1 as a view of the output', () => {
  for (const positions of [1, 2]) {
    const t = logits(positions);
    const row = logitRows(t, (2 * positions - 1) * VOCAB, 2 * positions * VOCAB);
    expect([...row]).toEqual([0, 1, 2, 3].map((c) => (2 * positions - 1) * VOCAB + c));
    expect(row.buffer).toBe((t.data as Float32Array).buffer);
  }
});

test('every position of a prompt: the last row copied, so the rest can be freed', () => {
  const t = logits(3);
  const row = logitRows(t, 5 * VOCAB, 6 * VOCAB);
  expect([...row]).toEqual([20, 21, 22, 23]);
  expect(row.buffer).not.toBe((t.data as Float32Array).buffer);
});

test('float16 logits are converted whatever their count', () => {
  // 1.0 and 2.0 as float16 bits.
  const t = new ort.Tensor('float16', Uint16Array.of(0x3c00, 0x4000), [1, 1, 2]);
  expect([...logitRows(t, 0, 2)]).toEqual([1, 2]);
});
