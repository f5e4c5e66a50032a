/** `models quantize --embedding`: the tied embedding's lookup reads the LM head's 4-bit blocks. */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataType, FloatAttr, GraphBuilder } from '../src/shared/model/onnx-graph.ts';
import { ort } from '../src/shared/model/ort.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { writeModel } from '../src/tools/models/onnx-file.ts';
import { quantizeModel } from '../src/tools/models/quantize.ts';
import { dequantizeBlocks, quantizeBlocks } from '../src/tools/models/quantize-blocks.ts';

const work = mkdtempSync(join(tmpdir(), 'quantize-embedding-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const VOCAB = 40;
const HIDDEN = 64;
const BLOCK = 32;

/** Gather(table, ids) → rows, Gemm(x, table, transB=1) → logits: a tied embedding and LM head. */
function tiedModel(table: Float32Array) {
  const g = new GraphBuilder('tied');
  const ids = g.input('input_ids', DataType.INT64, [1, 'n']);
  const x = g.input('x', DataType.FLOAT, [1, HIDDEN]);
  const embed = g.floats('embed', table, [VOCAB, HIDDEN]);
  g.output(g.op('Gather', [embed, ids]), 'rows', DataType.FLOAT, [1, 'n', HIDDEN]);
  g.output(g.op('Gemm', [x, embed], { transB: 1, alpha: new FloatAttr(1), beta: new FloatAttr(1) }), 'logits', DataType.FLOAT, [1, VOCAB]);
  return g.toModel();
}

test('the rows come out exactly as the 4-bit blocks dequantize, and the float32 table is gone', async () => {
  const random = seededRandom(3);
  const table = Float32Array.from({ length: VOCAB * HIDDEN }, () => random() * 2 - 1);
  const model = tiedModel(table);
  const path = join(work, 'model.onnx');
  expect(quantizeModel(model, path, { kind: 'nbits', bits: 4, blockSize: BLOCK }, true)).toBe(1);
  const graph = model.graph!;
  expect(graph.initializer.map((t) => t.name)).not.toContain('embed');
  expect(graph.node.map((n) => n.opType)).toEqual(['Reshape', 'GatherBlockQuantized', 'Reshape', 'Identity', 'MatMulNBits', 'Identity']);
  writeModel(model, path);

  // The reference: the same blocks dequantized in JS, [K, N] with N = vocabulary.
  const reference = dequantizeBlocks(quantizeBlocks(table, { k: HIDDEN, n: VOCAB, bits: 4, blockSize: BLOCK, layout: 'n-major' }));
  const tokens = [0, 7, 39, 7];
  const session = await ort.InferenceSession.create(path);
  try {
    const out = await session.run({
      input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [1, tokens.length]),
      x: new ort.Tensor('float32', new Float32Array(HIDDEN).fill(0.5), [1, HIDDEN]),
    });
    expect(out.rows!.dims).toEqual([1, tokens.length, HIDDEN]);
    const expected = Float32Array.from({ length: tokens.length * HIDDEN }, (_, i) => reference[(i % HIDDEN) * VOCAB + tokens[Math.floor(i / HIDDEN)]!]!);
    expect(out.rows!.data as Float32Array).toEqual(expected);
  } finally {
    await session.release();
  }
});

test('a hidden size that is not a whole number of blocks keeps the float32 lookup', () => {
  const model = tiedModel(new Float32Array(VOCAB * HIDDEN).fill(0.25));
  expect(quantizeModel(model, join(work, 'm.onnx'), { kind: 'nbits', bits: 4, blockSize: 128 }, true)).toBe(1);
  expect(model.graph!.node.map((n) => n.opType)).toContain('Gather');
  expect(model.graph!.initializer.map((t) => t.name)).toContain('embed');
});
