/**
 * The KV cache of the fused layout: per cache tensor one float32 buffer `[1, kv_heads, capacity, head_dim]`
 * that onnxruntime's GroupQueryAttention reads as past and writes as present in place (it compares the
 * two pointers). The capacity doubles when a sequence outgrows it, so a long generation copies its cache
 * a logarithmic number of times instead of once per step, and a rollback only shortens the length fed.
 *
 * @example
 * const capacity = kvCapacity(130, 128, 2048); // 256
 * const buffers = growKvBuffers(old, names, 2, 64, capacity, 128);
 */
import { ort, type OrtTensor } from './ort.ts';

/** The smallest capacity a fresh buffer gets: small prompts never grow it. */
export const MIN_KV_CAPACITY = 256;

/** The capacity for `needed` positions: `current` while it fits, else doubled until it does, at most `maxPositions`. */
export function kvCapacity(needed: number, current: number, maxPositions: number): number {
  let capacity = Math.max(current, Math.min(MIN_KV_CAPACITY, maxPositions));
  while (capacity < needed) capacity *= 2;
  return Math.min(capacity, maxPositions);
}

/** New buffers of `capacity` positions holding the first `length` positions of `old` (absent: all zeros). */
export function growKvBuffers(
  old: Record<string, OrtTensor> | undefined,
  names: readonly string[],
  kvHeads: number,
  headDim: number,
  capacity: number,
  length: number,
): Record<string, OrtTensor> {
  const buffers: Record<string, OrtTensor> = {};
  for (const name of names) {
    const data = new Float32Array(kvHeads * capacity * headDim);
    const previous = old?.[name];
    if (previous && length > 0) {
      const from = previous.data as Float32Array;
      const oldCapacity = previous.dims[2]!;
      for (let h = 0; h < kvHeads; h++) data.set(from.subarray(h * oldCapacity * headDim, (h * oldCapacity + length) * headDim), h * capacity * headDim);
    }
    buffers[name] = new ort.Tensor('float32', data, [1, kvHeads, capacity, headDim]);
  }
  return buffers;
}
