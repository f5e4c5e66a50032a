import { expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { halfBitsToFloat32 } from '../src/shared/model/float-tensors.ts';
import { quantizeQ4_0, quantizeQ8_0, toHalfBits } from '../src/tools/llama-cpp-peer/gguf-quantize.ts';

const fromHalfBits = (h: number) => halfBitsToFloat32(Uint16Array.of(h))[0]!;
import { type GgufValue, writeGguf } from '../src/tools/llama-cpp-peer/gguf-writer.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { dequantizeQ4_0, dequantizeQ8_0, readGguf } from './helpers/gguf-reader.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'gguf-'));

test('writeGguf round-trips: header, typed KV values, tensor infos, 32-byte aligned offsets and data', () => {
  const dir = tmp();
  try {
    const path = join(dir, 'm.gguf');
    const f32 = new Float32Array([1, -2, 3.5, 0.25, 7]); // 20 bytes: the next tensor starts at 32
    const q8 = quantizeQ8_0(new Float32Array(64).map((_, i) => (i - 32) / 16)); // 2 blocks = 68 bytes
    const q4 = quantizeQ4_0(new Float32Array(32).map((_, i) => (i - 8) / 8)); // 1 block = 18 bytes
    const metadata = new Map<string, GgufValue>([
      ['general.architecture', { type: 'string', value: 'qwen2' }],
      ['qwen2.block_count', { type: 'uint32', value: 24 }],
      ['qwen2.rope.freq_base', { type: 'float32', value: 1000000 }],
      ['tokenizer.ggml.add_bos_token', { type: 'bool', value: false }],
      ['big', { type: 'uint64', value: 2n ** 40n }],
      ['tokens', { type: 'array', itemType: 'string', value: ['a', 'Ġb', '<|x|>'] }],
      ['types', { type: 'array', itemType: 'int32', value: [1, -3, 4] }],
    ]);
    writeGguf(path, metadata, [
      { name: 'v', dims: [5], type: 'F32', data: () => new Uint8Array(f32.buffer) },
      { name: 'm8', dims: [32, 2], type: 'Q8_0', data: () => q8 },
      { name: 'm4', dims: [32, 1], type: 'Q4_0', data: () => q4 },
    ]);
    const bytes = new Uint8Array(readFileSync(path));
    const file = readGguf(bytes);
    expect(file.magic).toBe(0x46554747);
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe('GGUF');
    expect(file.version).toBe(3);
    expect([...file.metadata]).toEqual([
      ['general.architecture', { type: 8, value: 'qwen2' }],
      ['qwen2.block_count', { type: 4, value: 24 }],
      ['qwen2.rope.freq_base', { type: 6, value: 1000000 }],
      ['tokenizer.ggml.add_bos_token', { type: 7, value: false }],
      ['big', { type: 10, value: 2n ** 40n }],
      ['tokens', { type: 9, value: ['a', 'Ġb', '<|x|>'] }],
      ['types', { type: 9, value: [1, -3, 4] }],
    ]);
    expect(file.tensors).toEqual([
      { name: 'v', dims: [5], type: 0, offset: 0 },
      { name: 'm8', dims: [32, 2], type: 8, offset: 32 },
      { name: 'm4', dims: [32, 1], type: 2, offset: 128 },
    ]);
    expect(file.dataStart % 32).toBe(0);
    // The last tensor is padded too: 128 + 18 → 160.
    expect(bytes.length).toBe(file.dataStart + 160);
    const at = (offset: number, n: number) => bytes.subarray(file.dataStart + offset, file.dataStart + offset + n);
    expect(new Float32Array(at(0, 20).slice().buffer)).toEqual(f32);
    expect([...at(32, 68)]).toEqual([...q8]);
    expect([...at(128, 18)]).toEqual([...q4]);
    expect(at(20, 12)).toEqual(new Uint8Array(12));
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('writeGguf refuses data that does not fit its dims and leaves no file behind', () => {
  const dir = tmp();
  try {
    const path = join(dir, 'bad.gguf');
    expect(() => writeGguf(path, new Map(), [{ name: 'w', dims: [32, 2], type: 'Q8_0', data: () => new Uint8Array(34) }])).toThrow(
      'tensor w: 34 bytes of data, its dims and type need 68',
    );
    expect(() => writeGguf(path, new Map(), [{ name: 'w', dims: [30], type: 'Q4_0', data: () => new Uint8Array(18) }])).toThrow(
      'Q4_0 rows need a multiple of 32 values, got 30',
    );
    expect(existsSync(path)).toBe(false);
    expect(existsSync(`${path}.partial`)).toBe(false);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('half-precision scales round to nearest even', () => {
  expect(toHalfBits(1)).toBe(0x3c00);
  expect(toHalfBits(-2)).toBe(0xc000);
  expect(toHalfBits(0.0625)).toBe(0x2c00);
  expect(toHalfBits(65504)).toBe(0x7bff);
  expect(toHalfBits(1e6)).toBe(0x7c00);
  expect(toHalfBits(0.1)).toBe(0x2e66);
  expect(toHalfBits(2 ** -24)).toBe(0x0001);
  expect(fromHalfBits(0x2e66)).toBe(0.0999755859375);
  expect(toHalfBits(1 + 2 ** -11)).toBe(0x3c00); // a tie goes to the even mantissa
});

test('Q8_0 of a hand-made block: d = max|x| / 127 as f16, int8 q, dequantizes exactly', () => {
  // q * 2^-4 with q = 127 present: d = 2^-4 exactly, so nothing is lost.
  const q = Array.from({ length: 32 }, (_, j) => (j === 5 ? 127 : ((j * 37) % 255) - 127));
  const values = new Float32Array(q.map((x) => x / 16));
  const block = quantizeQ8_0(values);
  expect(block.length).toBe(34);
  expect(block[0]! | (block[1]! << 8)).toBe(0x2c00);
  expect([...new Int8Array(block.buffer, 2, 32)]).toEqual(q);
  expect(dequantizeQ8_0(block)).toEqual(values);
});

test('Q4_0 of a hand-made block: d = m / -8, low nibbles hold elements 0..15 and high nibbles 16..31', () => {
  // q(j) in 0..15, value (q - 8) * 0.125: the largest magnitude is -1 (q = 0), so d = 0.125.
  const q = Array.from({ length: 32 }, (_, j) => (j < 16 ? (7 * j) % 16 : (7 * (j - 16) + 1) % 16));
  const values = new Float32Array(q.map((x) => (x - 8) * 0.125));
  const block = quantizeQ4_0(values);
  expect(block.length).toBe(18);
  expect(block[0]! | (block[1]! << 8)).toBe(toHalfBits(0.125));
  expect(block[2]).toBe(0x10); // q(0) = 0, q(16) = 1
  expect(block[3]).toBe(0x87); // q(1) = 7, q(17) = 8
  expect(dequantizeQ4_0(block)).toEqual(values);
});

test('Q8_0 and Q4_0 of random weights stay within half a step (plus the f16 scale rounding) of the fp32 values', () => {
  const random = seededRandom(7);
  const values = new Float32Array(32 * 256).map(() => (random() * 2 - 1) * 0.0346);
  for (const [quantize, dequantize, blockBytes, halfSteps] of [
    [quantizeQ8_0, dequantizeQ8_0, 34, 0.5],
    // Q4_0 clamps q = 16 to 15 for values at +8 steps, a full step off.
    [quantizeQ4_0, dequantizeQ4_0, 18, 1],
  ] as const) {
    const bytes = quantize(values);
    const back = dequantize(bytes);
    const view = new DataView(bytes.buffer);
    let sumError = 0;
    for (let b = 0; b < 256; b++) {
      const d = Math.abs(fromHalfBits(view.getUint16(b * blockBytes, true)));
      for (let j = 0; j < 32; j++) {
        const error = Math.abs(back[b * 32 + j]! - values[b * 32 + j]!);
        expect(error).toBeLessThanOrEqual(d * (halfSteps + 128 * 2 ** -11) + 1e-9);
        sumError += error / d;
      }
    }
    // Rounding errors are spread evenly over a step: a mean of about a quarter step.
    expect(sumError / values.length).toBeGreaterThan(0.2);
    expect(sumError / values.length).toBeLessThan(0.3);
  }
});
