/**
 * Symmetric block-wise weight quantization in the layout of onnxruntime's com.microsoft `MatMulNBits`
 * (docs/ContribOperators.md): for a weight of K inputs and N outputs, `B` is `[N, ceil(K/block), block*bits/8]`
 * (each output column's K values in blocks, 4-bit values two per byte, the first in the low nibble),
 * `scales` is `[N, ceil(K/block)]`, and with no `zero_points` input the zero point is 2^(bits-1)
 * (8 for 4 bits, 128 for 8 bits). A value is `(q - zero) * scale`.
 *
 * The scale follows onnxruntime's own RTN quantizer (MLAS `range2scale`): the block's value of largest
 * magnitude, sign included, divided by -2^(bits-1), so that value maps exactly onto q = 0 and the
 * remaining 2^bits - 1 levels cover the opposite side; values round half away from zero. The output is
 * byte-identical to onnxruntime's quantizer on the shared stories260K export (tests/quantize.test.ts).
 *
 * @example
 * const q = quantizeBlocks(weightKxN, { k: 896, n: 4864, bits: 4, blockSize: 32, layout: 'k-major' });
 * const w = dequantizeBlocks(q); // [K, N] float32, what MatMulNBits multiplies by
 */

export type WeightBits = 4 | 8;

export interface BlockShape {
  /** Input features (the MatMul's inner dimension). */
  k: number;
  /** Output features. */
  n: number;
  bits: WeightBits;
  blockSize: number;
}

export interface QuantizedBlocks extends BlockShape {
  /** `[N, blocksPerColumn, blockSize * bits / 8]` bytes. */
  packed: Uint8Array<ArrayBuffer>;
  /** `[N, blocksPerColumn]` scales. */
  scales: Float32Array<ArrayBuffer>;
  blocksPerColumn: number;
}

export interface QuantizeInput extends BlockShape {
  /**
   * `k-major`: the weight is `[K, N]` (a MatMul's B); `n-major`: `[N, K]` (a Gemm's B with transB=1,
   * e.g. a tied embedding used as the LM head).
   */
  layout: 'k-major' | 'n-major';
}

/** Block sizes MatMulNBits accepts: a power of two, at least 16. */
export function isValidBlockSize(blockSize: number): boolean {
  return Number.isInteger(blockSize) && blockSize >= 16 && (blockSize & (blockSize - 1)) === 0;
}

export function quantizeBlocks(weight: Float32Array, shape: QuantizeInput): QuantizedBlocks {
  const { k, n, bits, blockSize, layout } = shape;
  if (weight.length !== k * n) throw new Error(`weight has ${weight.length} values, expected ${k}x${n}`);
  if (!isValidBlockSize(blockSize)) throw new Error(`block size ${blockSize} is not a power of two ≥ 16`);
  const blocksPerColumn = Math.ceil(k / blockSize);
  const blobBytes = (blockSize * bits) / 8;
  const packed = new Uint8Array(n * blocksPerColumn * blobBytes);
  const scales = new Float32Array(n * blocksPerColumn);
  const zero = 1 << (bits - 1);
  const maxLevel = (1 << bits) - 1;
  const at = layout === 'k-major' ? (row: number, col: number) => weight[row * n + col]! : (row: number, col: number) => weight[col * k + row]!;
  const block = new Float32Array(blockSize);
  for (let col = 0; col < n; col++) {
    for (let b = 0; b < blocksPerColumn; b++) {
      // The last block of a K that is not a multiple of the block size is padded with zeros.
      let extreme = 0;
      for (let i = 0; i < blockSize; i++) {
        const row = b * blockSize + i;
        const v = row < k ? at(row, col) : 0;
        block[i] = v;
        if (Math.abs(v) > Math.abs(extreme)) extreme = v;
      }
      const scale = Math.fround(extreme / -zero);
      const reciprocal = scale === 0 ? 0 : Math.fround(1 / scale);
      scales[col * blocksPerColumn + b] = scale;
      const base = (col * blocksPerColumn + b) * blobBytes;
      // Padding past K stays 0 bytes, as onnxruntime's quantizer leaves it (the kernel never reads it).
      for (let i = 0; i < Math.min(blockSize, k - b * blockSize); i++) {
        const q = Math.min(maxLevel, Math.max(0, roundHalfAway(Math.fround(Math.fround(block[i]! * reciprocal) + zero))));
        if (bits === 8) packed[base + i] = q;
        else packed[base + (i >> 1)]! |= i & 1 ? q << 4 : q;
      }
    }
  }
  return { k, n, bits, blockSize, packed, scales, blocksPerColumn };
}

/** The `[K, N]` float32 weight a MatMulNBits node with these blocks multiplies by. */
export function dequantizeBlocks(q: QuantizedBlocks): Float32Array {
  const { k, n, bits, blockSize, blocksPerColumn, packed, scales } = q;
  const out = new Float32Array(k * n);
  const zero = 1 << (bits - 1);
  const blobBytes = (blockSize * bits) / 8;
  for (let col = 0; col < n; col++) {
    for (let row = 0; row < k; row++) {
      const b = Math.floor(row / blockSize);
      const i = row % blockSize;
      const base = (col * blocksPerColumn + b) * blobBytes;
      const level = bits === 8 ? packed[base + i]! : (packed[base + (i >> 1)]! >> (i & 1 ? 4 : 0)) & 0xf;
      out[row * n + col] = Math.fround((level - zero) * scales[col * blocksPerColumn + b]!);
    }
  }
  return out;
}

/** C's roundf: halves go away from zero (Math.round sends -2.5 to -2). */
function roundHalfAway(x: number): number {
  return Math.sign(x) * Math.round(Math.abs(x));
}
