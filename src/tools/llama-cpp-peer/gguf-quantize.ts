/**
 * ggml's block formats, written from the GGUF spec and ggml-quants.c's reference quantizers: 32 weights
 * per block, one fp16 scale `d` first. Q8_0 keeps `round(x / d)` as int8 with d = max|x| / 127; Q4_0
 * keeps 4-bit `q` with value (q - 8) * d, where d = m / -8 for the m of largest magnitude (so m maps to
 * q = 0 exactly), low nibbles holding elements 0..15 of the block and high nibbles 16..31.
 */
export const QK = 32;
export const Q8_0_BLOCK_BYTES = 2 + QK;
export const Q4_0_BLOCK_BYTES = 2 + QK / 2;

const half = new Float16Array(1);
const halfBits = new Uint16Array(half.buffer);

/**
 * IEEE half precision bits of `value` rounded first to float32, as ggml computes its scales, then to half
 * with round-to-nearest-even (the platform's Float16Array conversion, which is ggml's FP32_TO_FP16).
 */
export function toHalfBits(value: number): number {
  half[0] = Math.fround(value);
  return halfBits[0]!;
}

function checkLength(n: number): void {
  if (n % QK !== 0) throw new Error(`a row quantized in blocks of ${QK} needs a multiple of ${QK} values, got ${n}`);
}

/**
 * Q8_0 blocks of `values` (a whole number of rows whose length is a multiple of 32).
 * @example
 * const bytes = quantizeQ8_0(new Float32Array(32).fill(1)); // 34 bytes: d = 1/127, every q = 127
 */
export function quantizeQ8_0(values: Float32Array): Uint8Array {
  checkLength(values.length);
  const blocks = values.length / QK;
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * QK;
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[base + j]!));
    // Math.fround throughout: ggml computes in float32, and a double can round a boundary value the other way.
    const d = Math.fround(amax / 127);
    const id = d ? Math.fround(1 / d) : 0;
    const at = b * Q8_0_BLOCK_BYTES;
    view.setUint16(at, toHalfBits(d), true);
    for (let j = 0; j < QK; j++) {
      const x = Math.fround(values[base + j]! * id);
      // C's roundf: halves away from zero.
      view.setInt8(at + 2 + j, Math.sign(x) * Math.round(Math.abs(x)));
    }
  }
  return out;
}

/**
 * Q4_0 blocks of `values` (a whole number of rows whose length is a multiple of 32).
 * @example
 * const bytes = quantizeQ4_0(values); // 18 bytes per 32 values
 */
export function quantizeQ4_0(values: Float32Array): Uint8Array {
  checkLength(values.length);
  const blocks = values.length / QK;
  const out = new Uint8Array(blocks * Q4_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * QK;
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK; j++) {
      const v = values[base + j]!;
      if (Math.abs(v) > amax) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = Math.fround(max / -8);
    const id = d ? Math.fround(1 / d) : 0;
    const at = b * Q4_0_BLOCK_BYTES;
    view.setUint16(at, toHalfBits(d), true);
    const nibble = (v: number) => Math.min(15, Math.trunc(Math.fround(Math.fround(v * id) + 8.5)));
    for (let j = 0; j < QK / 2; j++) out[at + 2 + j] = nibble(values[base + j]!) | (nibble(values[base + j + QK / 2]!) << 4);
  }
  return out;
}
