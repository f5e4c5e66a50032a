/**
 * The KV cache of the fused layout: per cache tensor one float32 buffer `[1, kv_heads, capacity, head_dim]`,
 * fed to onnxruntime's GroupQueryAttention as past. The run's new positions come back alone, as
 * `new_key_values.*`, and are written into the buffer here (writeNewPositions); with a graph built before
 * those outputs the buffer is also fetched as present and written in place (the op compares the two
 * pointers). A rollback only shortens the length fed.
 *
 * Why not always in place: onnxruntime-node copies every fetched output into a new JavaScript buffer after
 * the run, a preallocated present.* included, so fetching the buffer copies the whole capacity once a step
 * into fresh memory, whose pages fault in. That is also why the capacity grows in steps of KV_CAPACITY_STEP
 * positions rather than doubling: for older graphs a small step keeps that copy within 31 positions of the
 * length, and a growth copies the cache once every 32 tokens, into a released buffer of that size from the
 * model's KvBufferPool where one is free. The smaller the step, the fewer fresh pages each step's copy
 * faults in, and page faults are a step's time that no kernel spends computing.
 *
 * @example
 * const capacity = kvCapacity(300, 288, 2048); // 320
 * const buffers = growKvBuffers(old, names, 2, 64, capacity, 288);
 */
import { newKeyValuesName } from './decoder-io.ts';
import { ort, type OrtTensor } from './ort.ts';

/** Positions a buffer grows by (and its smallest capacity). */
export const KV_CAPACITY_STEP = 32;

/** The capacity for `needed` positions: `current` while it fits, else `needed` rounded up to a whole step, at most `maxPositions`. */
export function kvCapacity(needed: number, current: number, maxPositions: number): number {
  if (needed <= current) return current;
  return Math.min(Math.ceil(needed / KV_CAPACITY_STEP) * KV_CAPACITY_STEP, maxPositions);
}

/**
 * New buffers of `capacity` positions holding the first `length` positions of `old` (absent: all zeros),
 * from `allocate` (zeros of the given element count: a KvBufferPool's `take`, or fresh memory).
 */
export function growKvBuffers(
  old: Record<string, OrtTensor> | undefined,
  names: readonly string[],
  kvHeads: number,
  headDim: number,
  capacity: number,
  length: number,
  allocate: (elements: number) => Float32Array = (elements) => new Float32Array(elements),
): Record<string, OrtTensor> {
  const buffers: Record<string, OrtTensor> = {};
  for (const name of names) {
    const data = allocate(kvHeads * capacity * headDim);
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

/** The outputs of a fused-layout run: logits and hidden states allocated by onnxruntime, present.* the past `buffers`. */
export function sharedFetches(buffers: Record<string, OrtTensor>, hasHiddenStates: boolean): Record<string, OrtTensor | null> {
  const fetches: Record<string, OrtTensor | null> = { logits: null };
  if (hasHiddenStates) fetches.hidden_states = null;
  for (const [name, buffer] of Object.entries(buffers)) fetches[name.replace('past_key_values', 'present')] = buffer;
  return fetches;
}

/** The outputs of a fused-layout run whose graph has `new_key_values.*`: logits, hidden states and only the new positions. */
export function newPositionFetches(pastNames: readonly string[], hasHiddenStates: boolean): Record<string, OrtTensor | null> {
  const fetches: Record<string, OrtTensor | null> = { logits: null };
  if (hasHiddenStates) fetches.hidden_states = null;
  for (const name of pastNames) fetches[newKeyValuesName(name)] = null;
  return fetches;
}

/**
 * Copies row `row` of `rows` (`new_key_values.*`, `[batch, kv_heads, n, head_dim]`) into row `intoRow` of
 * `buffer` (`[rows, kv_heads, capacity, head_dim]`: a sequence's own buffer, or kept batch buffers) at
 * positions `at` to `at + n − 1`.
 */
export function writeNewPositions(buffer: OrtTensor, rows: OrtTensor, row: number, at: number, intoRow = 0): void {
  const [, heads, n, headDim] = rows.dims as [number, number, number, number];
  const from = rows.data as Float32Array;
  const to = buffer.data as Float32Array;
  const capacity = buffer.dims[2]!;
  for (let h = 0; h < heads; h++) {
    const start = (row * heads + h) * n * headDim;
    to.set(from.subarray(start, start + n * headDim), ((intoRow * heads + h) * capacity + at) * headDim);
  }
}
