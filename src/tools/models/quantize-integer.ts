/**
 * 8-bit weights for onnxruntime's integer MatMul: each output column of a weight symmetric around the
 * zero point 128 (scale = the column's largest magnitude / 127, levels 1..255), multiplied by
 * activations that DynamicQuantizeLinear turns into uint8 on every call. The weights are uint8, not
 * int8: onnxruntime's u8×s8 kernel on CPUs without VNNI adds pairs of products in 16 bits, which
 * saturate (255·127·2 > 32767) and cost the demo pack next-token agreement; u8×u8 widens
 * first. `--dtype int8` used this form until MatMulNBits bits=8 with accuracy_level 4 proved at least as
 * fast (`bench int8-kernels`) and batchable; `bench int8-kernels` still times it against that.
 *
 * @example
 * const q = quantizeColumns(weightKxN, 896, 4864, 'k-major'); // q.data [K, N] uint8, q.scales [N]
 */
export const WEIGHT_ZERO_POINT = 128;

export interface QuantizedColumns {
  /** `[K, N]` uint8 levels around WEIGHT_ZERO_POINT (MatMulInteger's B). */
  data: Uint8Array<ArrayBuffer>;
  /** `[N]` per-column scales. */
  scales: Float32Array<ArrayBuffer>;
}

export function quantizeColumns(weight: Float32Array, k: number, n: number, layout: 'k-major' | 'n-major'): QuantizedColumns {
  if (weight.length !== k * n) throw new Error(`weight has ${weight.length} values, expected ${k}x${n}`);
  const at = layout === 'k-major' ? (row: number, col: number) => weight[row * n + col]! : (row: number, col: number) => weight[col * k + row]!;
  const scales = new Float32Array(n);
  const data = new Uint8Array(k * n).fill(WEIGHT_ZERO_POINT);
  for (let col = 0; col < n; col++) {
    let maxAbs = 0;
    for (let row = 0; row < k; row++) maxAbs = Math.max(maxAbs, Math.abs(at(row, col)));
    const scale = Math.fround(maxAbs / 127);
    scales[col] = scale;
    if (scale === 0) continue;
    for (let row = 0; row < k; row++) {
      const v = at(row, col) / scale;
      data[row * n + col] = WEIGHT_ZERO_POINT + Math.max(-127, Math.min(127, Math.sign(v) * Math.round(Math.abs(v))));
    }
  }
  return { data, scales };
}

/** The `[K, N]` float32 weight the integer MatMul effectively multiplies by. */
export function dequantizeColumns(q: QuantizedColumns, k: number, n: number): Float32Array {
  const out = new Float32Array(k * n);
  for (let row = 0; row < k; row++)
    for (let col = 0; col < n; col++) out[row * n + col] = Math.fround((q.data[row * n + col]! - WEIGHT_ZERO_POINT) * q.scales[col]!);
  return out;
}
