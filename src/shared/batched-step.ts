/**
 * One forward pass that feeds one token to each of several sequences (a batched decode step). Each
 * sequence keeps its own KV cache; the step gathers them into one batch and gives each row its part of
 * the outputs back.
 *
 * - `plain` layout (attention_mask, position_ids; present one position longer than past): the caches are
 *   LEFT-padded to the longest, the padded slots get attention_mask 0 and each row its own position id,
 *   as Hugging Face's batched generation feeds them. Each row's new cache is its slice of `present.*`,
 *   without the padding.
 * - `fused` layout (GroupQueryAttention): one buffer `[batch, kv_heads, capacity, head_dim]` per cache
 *   tensor holds each row's positions from the left, the free space on the right; `seqlens_k` gives each
 *   row its length. Each row's new position is copied into the row's own buffer, where a lone step would
 *   have written it: from `new_key_values.*` (only the new positions come back), or with an older graph
 *   from the batch buffers, fetched back as present.* and written in place. The batch buffers come from
 *   and go back to the model's KvBufferPool, so a pass writes into memory already mapped.
 *
 * @example
 * const results = await runBatchedStep(model, [{ sequence: a, token: 17 }, { sequence: b, token: 4 }]);
 * results[1].logits; // b's next-token logits
 */
import type { AppendResult, DecoderModel, DecoderSequence } from './decoder-model.ts';
import { feedable, float32Rows, indexTensor } from './float-tensors.ts';
import { newKeyValuesName } from './decoder-io.ts';
import { newPositionFetches, sharedFetches, writeNewPositions } from './kv-buffer.ts';
import { ort, type OrtTensor } from './ort.ts';

export interface BatchRow {
  sequence: DecoderSequence;
  token: number;
}

type CacheData = Float32Array | Uint16Array;

/**
 * The fused batch buffers' capacity grows in steps of this many positions, so one size serves 32 passes
 * in a row from the pool (and a graph without new_key_values.*, whose buffers onnxruntime-node copies out
 * after each pass, copies at most 31 positions more than the longest row holds).
 */
const BATCH_CAPACITY_STEP = 32;

/** A cache tensor's elements as stored: float32, or float16 as raw bits (see float-tensors.ts's `feedable`). */
function cacheData(tensor: OrtTensor): CacheData {
  const data = tensor.data as ArrayBufferView;
  if (data instanceof Float32Array) return data;
  return new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2);
}

function cacheTensor(like: CacheData, dims: readonly number[]): OrtTensor {
  const size = dims.reduce((a, b) => a * b, 1);
  return like instanceof Float32Array ? new ort.Tensor('float32', new Float32Array(size), dims) : feedable(new ort.Tensor('float16', new Uint16Array(size), dims));
}

/** Runs the step and records each row's token in its sequence; results in the order of `rows`. */
export async function runBatchedStep(model: DecoderModel, rows: readonly BatchRow[]): Promise<AppendResult[]> {
  const { io, pack } = model;
  const batch = rows.length;
  const lengths = rows.map((r) => r.sequence.length);
  const longest = Math.max(...lengths);
  const feeds: Record<string, OrtTensor> = { input_ids: indexTensor(io.ids, rows.map((r) => r.token), [batch, 1]) };
  if (io.logitsToKeep) feeds.num_logits_to_keep = new ort.Tensor('int64', BigInt64Array.of(1n), []);
  let out: Record<string, OrtTensor>;
  let present: Record<string, OrtTensor>[] | undefined;
  if (io.layout === 'plain') {
    Object.assign(feeds, gatherLeftPadded(model, rows, longest));
    const total = longest + 1;
    // Row b's cache sits in the last lengths[b] of the `longest` past slots: the slots before are padding.
    feeds.attention_mask = indexTensor(io.mask!, { length: batch * total }, [batch, total], (i) => (i % total >= longest - lengths[Math.floor(i / total)]! ? 1 : 0));
    feeds.position_ids = indexTensor(io.positions!, lengths, [batch, 1]);
    out = await model.forward(feeds, batch);
    present = splitLeftPadded(model, out, lengths, longest);
  } else {
    // A whole number of BATCH_CAPACITY_STEPs, so the pool's buffer of the previous pass fits the next ones.
    const capacity = Math.ceil((longest + 1) / BATCH_CAPACITY_STEP) * BATCH_CAPACITY_STEP;
    const buffers = gatherRightFree(model, rows, capacity);
    Object.assign(feeds, buffers);
    feeds.seqlens_k = new ort.Tensor('int32', Int32Array.from(lengths), [batch]);
    feeds.total_sequence_length = new ort.Tensor('int32', Int32Array.of(longest + 1), []);
    if (io.newKeyValues) {
      out = await model.forward(feeds, batch, newPositionFetches(io.pastNames, model.hasHiddenStates));
      for (const name of io.pastNames) rows.forEach((row, b) => writeNewPositions(row.sequence.cache[name]!, out[newKeyValuesName(name)]!, b, lengths[b]!));
    } else {
      out = await model.forward(feeds, batch, sharedFetches(buffers, model.hasHiddenStates));
      scatterNewPositions(model, rows, buffers, lengths, capacity);
    }
    for (const buffer of Object.values(buffers)) model.kvPool.release(buffer.data as Float32Array);
  }
  const { vocabSize, hiddenSize } = pack;
  const results = rows.map((row, b): AppendResult => {
    const hidden = out.hidden_states ? float32Rows(out.hidden_states, b * hiddenSize, (b + 1) * hiddenSize) : new Float32Array(0);
    const previousHidden = row.sequence.acceptStep(row.token, present?.[b], hidden);
    return { logits: float32Rows(out.logits!, b * vocabSize, (b + 1) * vocabSize), hidden, previousHidden, batchSize: batch };
  });
  for (const t of Object.values(out)) t.dispose();
  return results;
}

/** `past_key_values.*` of the batch `[batch, kv_heads, longest, head_dim]`, each row's cache at the right end. */
function gatherLeftPadded(model: DecoderModel, rows: readonly BatchRow[], longest: number): Record<string, OrtTensor> {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  const feeds: Record<string, OrtTensor> = {};
  for (const name of model.io.pastNames) {
    const first = cacheData(rows[0]!.sequence.cache[name]!);
    const tensor = cacheTensor(first, [rows.length, heads, longest, headDim]);
    const data = cacheData(tensor);
    rows.forEach((row, b) => {
      const length = row.sequence.length;
      const from = cacheData(row.sequence.cache[name]!);
      for (let h = 0; h < heads; h++) data.set(from.subarray(h * length * headDim, (h + 1) * length * headDim), ((b * heads + h) * longest + longest - length) * headDim);
    });
    feeds[name] = tensor;
  }
  return feeds;
}

/** Each row's new cache `[1, kv_heads, length + 1, head_dim]`: its slice of `present.*` without the padding. */
function splitLeftPadded(model: DecoderModel, out: Record<string, OrtTensor>, lengths: readonly number[], longest: number): Record<string, OrtTensor>[] {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  const total = longest + 1;
  const caches = lengths.map(() => ({}) as Record<string, OrtTensor>);
  for (const name of model.io.pastNames) {
    const data = cacheData(out[name.replace('past_key_values', 'present')]!);
    lengths.forEach((length, b) => {
      const tensor = cacheTensor(data, [1, heads, length + 1, headDim]);
      const to = cacheData(tensor);
      for (let h = 0; h < heads; h++) {
        const start = ((b * heads + h) * total + longest - length) * headDim;
        to.set(data.subarray(start, start + (length + 1) * headDim), h * (length + 1) * headDim);
      }
      caches[b]![name] = tensor;
    });
  }
  return caches;
}

/** The fused layout's batch buffers `[batch, kv_heads, capacity, head_dim]`, each row's positions from the left. */
function gatherRightFree(model: DecoderModel, rows: readonly BatchRow[], capacity: number): Record<string, OrtTensor> {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  for (const row of rows) row.sequence.fitBuffers(row.sequence.length + 1);
  const buffers: Record<string, OrtTensor> = {};
  for (const name of model.io.pastNames) {
    const data = model.kvPool.take(rows.length * heads * capacity * headDim);
    rows.forEach((row, b) => {
      const own = row.sequence.cache[name]!;
      const from = own.data as Float32Array;
      const ownCapacity = own.dims[2]!;
      const length = row.sequence.length;
      for (let h = 0; h < heads; h++) data.set(from.subarray(h * ownCapacity * headDim, (h * ownCapacity + length) * headDim), (b * heads + h) * capacity * headDim);
    });
    buffers[name] = new ort.Tensor('float32', data, [rows.length, heads, capacity, headDim]);
  }
  return buffers;
}

/** Copies each row's new position from the batch buffers into its own buffer, where a lone step writes it. */
function scatterNewPositions(model: DecoderModel, rows: readonly BatchRow[], buffers: Record<string, OrtTensor>, lengths: readonly number[], capacity: number): void {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  for (const name of model.io.pastNames) {
    const data = buffers[name]!.data as Float32Array;
    rows.forEach((row, b) => {
      const own = row.sequence.cache[name]!;
      const to = own.data as Float32Array;
      const ownCapacity = own.dims[2]!;
      const at = lengths[b]!;
      for (let h = 0; h < heads; h++) {
        const start = ((b * heads + h) * capacity + at) * headDim;
        to.set(data.subarray(start, start + headDim), (h * ownCapacity + at) * headDim);
      }
    });
  }
}
