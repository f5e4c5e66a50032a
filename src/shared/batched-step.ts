/**
 * One forward pass over several sequences. In the fused layout each row feeds the same number of tokens:
 * one (a batched decode step, each sequence at its own length), or several into sequences that are still
 * empty (their first prompts, cut to one length: onnxruntime's GroupQueryAttention takes several positions
 * for several rows only as a first prompt, and rows of one length need no padding, so the head's last
 * positions are every row's last). In the plain layout rows may also feed different numbers of tokens (a
 * cloud step's ten-odd beside a decode step's one). Each sequence keeps its own KV cache; the pass gathers
 * them into one batch and gives each row its part of the outputs back.
 *
 * - `plain` layout (attention_mask, position_ids; present as long as past and the new positions): the
 *   caches are LEFT-padded to the longest, and each row's new tokens sit at the end of the new slots,
 *   after padding of their own; padded slots get attention_mask 0 and each row its own position ids, as
 *   Hugging Face's batched generation feeds them, so every row's last position is the pass's last. Each
 *   row's new cache is its slices of `present.*`, without the padding.
 * - `fused` layout (GroupQueryAttention): one buffer `[batch, kv_heads, capacity, head_dim]` per cache
 *   tensor holds each row's positions from the left, the free space on the right; `seqlens_k` gives each
 *   row its length. Each row's new positions are copied into the row's own buffer, where a lone append
 *   would have written them: from `new_key_values.*` (only the new positions come back), or with an older
 *   graph from the batch buffers, fetched back as present.* and written in place. The batch buffers come
 *   from and go back to the model's KvBufferPool, so a pass writes into memory already mapped.
 *
 * @example
 * const results = await runBatchedPass(model, [{ sequence: a, tokens: [17] }, { sequence: b, tokens: [4] }]);
 * results[1].logits; // b's next-token logits
 */
import type { AppendResult, DecoderModel, DecoderSequence } from './decoder-model.ts';
import { feedable, float32Rows, indexTensor, logitRows } from './float-tensors.ts';
import { newKeyValuesName } from './decoder-io.ts';
import { newPositionFetches, sharedFetches, writeNewPositions } from './kv-buffer.ts';
import { ort, type OrtTensor } from './ort.ts';
import { AppError } from './errors.ts';
import type { KeptBatch } from './kept-batch.ts';

export interface BatchRow {
  sequence: DecoderSequence;
  /** One token, or a first prompt's tokens (the same count on every row). */
  tokens: readonly number[];
}

type CacheData = Float32Array | Uint16Array;

/**
 * The fused batch buffers' capacity grows in steps of this many positions, so one size serves 32 passes
 * in a row from the pool (and a graph without new_key_values.*, whose buffers onnxruntime-node copies out
 * after each pass, copies at most 31 positions more than the longest row holds).
 */
const BATCH_CAPACITY_STEP = 32;

/** Room for `positions` in whole BATCH_CAPACITY_STEPs (one at least). */
function roundedCapacity(positions: number): number {
  return Math.max(1, Math.ceil(positions / BATCH_CAPACITY_STEP)) * BATCH_CAPACITY_STEP;
}

/** A cache tensor's elements as stored: float32, or float16 as raw bits (see float-tensors.ts's `feedable`). */
function cacheData(tensor: OrtTensor): CacheData {
  const data = tensor.data as ArrayBufferView;
  if (data instanceof Float32Array) return data;
  return new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2);
}

/**
 * A zeroed `[rows, kv_heads, positions, head_dim]` cache tensor of the plain layout's batched pass. float32
 * ones are the first part of a buffer from the model's pool with room for a whole number of
 * BATCH_CAPACITY_STEPs, so the next passes, a position longer, find the same sizes there: memory already
 * mapped, where fresh memory costs more than the copy into it (on the 2-core VM, 25 MB of fresh arrays
 * took 15 to 82 ms to fill, 2 ms when reused). A float16 cache's bits sit in a float32 buffer of half the
 * elements (the pool holds float32 arrays; the memory is what matters).
 */
function cacheTensor(model: DecoderModel, like: CacheData, dims: readonly [number, number, number, number]): OrtTensor {
  const [rows, heads, positions, headDim] = dims;
  const size = rows * heads * positions * headDim;
  const room = rows * heads * roundedCapacity(positions) * headDim;
  if (like instanceof Float32Array) return new ort.Tensor('float32', model.kvPool.take(room).subarray(0, size), dims);
  const buffer = model.kvPool.take(Math.ceil(room / 2)).buffer;
  return feedable(new ort.Tensor('float16', new Uint16Array(buffer, 0, size), dims));
}

/** Gives a cacheTensor's buffer back to the pool (nothing reads it any more). */
function releaseCacheTensor(model: DecoderModel, tensor: OrtTensor): void {
  model.kvPool.releaseBufferOf(tensor.data as ArrayBufferView);
  tensor.dispose();
}

/**
 * Bytes of the model's pool a plain-layout pass over sequences of `lengths`, fed `counts` tokens each (one
 * when omitted), writes into: the batch buffers the rows' caches are gathered into, and each row's new
 * cache split out of `present.*` (see cacheTensor). Between passes the pool holds both, one pass's gathered
 * buffers and the caches the next pass replaces, so a pass needing more than the pool holds copies into
 * fresh memory.
 */
export function plainPassPoolBytes(model: DecoderModel, lengths: readonly number[], counts: readonly number[] = lengths.map(() => 1)): number {
  const gathered = lengths.length * roundedCapacity(Math.max(...lengths));
  const split = lengths.reduce((sum, length, b) => sum + roundedCapacity(length + counts[b]!), 0);
  return model.kvBytesPerPosition * (gathered + split);
}

/** Runs the pass and records each row's tokens in its sequence; results in the order of `rows`. */
export async function runBatchedPass(model: DecoderModel, rows: readonly BatchRow[], kept?: KeptBatch): Promise<AppendResult[]> {
  const { io, pack } = model;
  const batch = rows.length;
  const counts = rows.map((r) => r.tokens.length);
  const n = Math.max(...counts);
  const lengths = rows.map((r) => r.sequence.length);
  const refusal = io.layout === 'plain' ? raggedPlainRefusal(counts, lengths) : fusedRefusal(counts, lengths);
  if (refusal) throw new AppError('INTERNAL', refusal);
  const longest = Math.max(...lengths);
  const total = longest + n;
  // Each row's tokens in the last of the n new slots; the slots before them (plain layout only) are masked.
  const fed = rows.flatMap((r) => [...new Array<number>(n - r.tokens.length).fill(r.tokens[0]!), ...r.tokens]);
  const feeds: Record<string, OrtTensor> = { input_ids: indexTensor(io.ids, fed, [batch, n]) };
  // As a lone append keeps them: the last position, and the one before for previousHidden.
  if (io.logitsToKeep) feeds.num_logits_to_keep = new ort.Tensor('int64', BigInt64Array.of(BigInt(Math.min(n, 2))), []);
  let out: Record<string, OrtTensor>;
  let present: Record<string, OrtTensor>[] | undefined;
  /** The fused layout's batch buffers, kept for the next pass or back to the pool once the rows have their results. */
  let keepAfter: Record<string, OrtTensor> | undefined;
  if (io.layout === 'plain') {
    const gathered = gatherLeftPadded(model, rows, longest);
    Object.assign(feeds, gathered);
    // Row b's cache sits in the last lengths[b] of the `longest` past slots, its tokens in the last counts[b]
    // of the n new ones: the slots before each are padding, which the mask hides.
    const seen = (b: number, column: number) => (column < longest ? column >= longest - lengths[b]! : column - longest >= n - counts[b]!);
    feeds.attention_mask = indexTensor(io.mask!, { length: batch * total }, [batch, total], (i) => (seen(Math.floor(i / total), i % total) ? 1 : 0));
    feeds.position_ids = indexTensor(io.positions!, { length: batch * n }, [batch, n], (i) => {
      const b = Math.floor(i / n);
      return lengths[b]! + Math.max(0, (i % n) - (n - counts[b]!));
    });
    try {
      out = await model.forward(feeds, batch * n);
    } finally {
      for (const tensor of Object.values(gathered)) releaseCacheTensor(model, tensor);
    }
    present = splitLeftPadded(model, out, lengths, counts, longest);
  } else {
    for (const row of rows) row.sequence.fitBuffers(row.sequence.length + n);
    // The kept batch buffers, with the rows that do not hold their sequence as it is copied in (kept-batch.ts);
    // else each row's cache gathered, in a whole number of BATCH_CAPACITY_STEPs so that the pool's buffers of
    // one pass fit the next ones.
    const reused = kept?.buffersFor(rows.map((r) => r.sequence), total, model.kvPool);
    for (const b of reused?.copy ?? []) copyRowCache(reused!.buffers, b, rows[b]!.sequence);
    const buffers = reused?.buffers ?? gatherRightFree(model, rows, roundedCapacity(total));
    Object.assign(feeds, buffers);
    feeds.seqlens_k = new ort.Tensor('int32', Int32Array.from(lengths, (l) => l + n - 1), [batch]);
    feeds.total_sequence_length = new ort.Tensor('int32', Int32Array.of(total), []);
    try {
      if (io.newKeyValues) {
        out = await model.forward(feeds, batch * n, newPositionFetches(io.pastNames, model.hasHiddenStates));
        for (const name of io.pastNames) {
          const added = out[newKeyValuesName(name)]!;
          rows.forEach((row, b) => row.sequence.isDisposed || writeNewPositions(row.sequence.cache[name]!, added, b, lengths[b]!));
          // The batch buffers too, where the next passes read them.
          if (kept) rows.forEach((_, b) => writeNewPositions(buffers[name]!, added, b, lengths[b]!, b));
        }
      } else {
        // The batch buffers were written in place: only the rows' own buffers need the new positions.
        out = await model.forward(feeds, batch * n, sharedFetches(buffers, model.hasHiddenStates));
        scatterNewPositions(model, rows, buffers, lengths, n);
      }
    } catch (e) {
      kept?.drop();
      throw e;
    }
    keepAfter = buffers;
  }
  const { vocabSize, hiddenSize } = pack;
  // Positions kept per row: every fed one, or the last num_logits_to_keep (hidden_states is cut alike where it is the head's input).
  const logitPositions = out.logits!.dims[1]!;
  const hiddenRows = out.hidden_states?.dims[1] ?? 0;
  const hiddenRow = (b: number, back: number) => float32Rows(out.hidden_states!, ((b + 1) * hiddenRows - back) * hiddenSize, ((b + 1) * hiddenRows - back + 1) * hiddenSize);
  const results = rows.map((row, b): AppendResult => {
    const hidden = out.hidden_states ? hiddenRow(b, 1) : new Float32Array(0);
    const previousHidden = out.hidden_states && counts[b]! >= 2 ? hiddenRow(b, 2) : undefined;
    // onnxruntime-node starts a run on a later turn of the event loop, so a row's sequence may have been
    // disposed (its generation cancelled) meanwhile: the others' results stand, that row's are not kept.
    if (row.sequence.isDisposed) {
      for (const t of Object.values(present?.[b] ?? {})) releaseCacheTensor(model, t);
      return { logits: new Float32Array(0), hidden, previousHidden: previousHidden ?? hidden, batchSize: batch };
    }
    const before = row.sequence.acceptAppend(row.tokens, present?.[b], hidden, previousHidden);
    const logits = logitRows(out.logits!, ((b + 1) * logitPositions - 1) * vocabSize, (b + 1) * logitPositions * vocabSize);
    return { logits, hidden, previousHidden: before, batchSize: batch };
  });
  for (const t of Object.values(out)) t.dispose();
  if (keepAfter) keepOrRelease(model, rows, keepAfter, kept);
  return results;
}

/** Keeps a pass's batch buffers for the passes after it (kept-batch.ts); without `kept` they go back to the pool. */
function keepOrRelease(model: DecoderModel, rows: readonly BatchRow[], buffers: Record<string, OrtTensor>, kept: KeptBatch | undefined): void {
  if (kept) return kept.keep(rows.map((r) => r.sequence), buffers);
  for (const buffer of Object.values(buffers)) model.kvPool.release(buffer.data as Float32Array);
}

/** `past_key_values.*` of the batch `[batch, kv_heads, longest, head_dim]`, each row's cache at the right end. */
function gatherLeftPadded(model: DecoderModel, rows: readonly BatchRow[], longest: number): Record<string, OrtTensor> {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  const feeds: Record<string, OrtTensor> = {};
  for (const name of model.io.pastNames) {
    const first = cacheData(rows[0]!.sequence.cache[name]!);
    const tensor = cacheTensor(model, first, [rows.length, heads, longest, headDim]);
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

/**
 * Each row's new cache `[1, kv_heads, length + count, head_dim]`: its slices of `present.*` (its past, then
 * its new positions), without the padding before either.
 */
function splitLeftPadded(model: DecoderModel, out: Record<string, OrtTensor>, lengths: readonly number[], counts: readonly number[], longest: number): Record<string, OrtTensor>[] {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  const n = Math.max(...counts);
  const total = longest + n;
  const caches = lengths.map(() => ({}) as Record<string, OrtTensor>);
  for (const name of model.io.pastNames) {
    const data = cacheData(out[name.replace('past_key_values', 'present')]!);
    lengths.forEach((length, b) => {
      const count = counts[b]!;
      const tensor = cacheTensor(model, data, [1, heads, length + count, headDim]);
      const to = cacheData(tensor);
      for (let h = 0; h < heads; h++) {
        const row = (b * heads + h) * total;
        const at = h * (length + count) * headDim;
        if (count === n) {
          to.set(data.subarray((row + longest - length) * headDim, (row + total) * headDim), at);
          continue;
        }
        to.set(data.subarray((row + longest - length) * headDim, (row + longest) * headDim), at);
        to.set(data.subarray((row + total - count) * headDim, (row + total) * headDim), at + length * headDim);
      }
      caches[b]![name] = tensor;
    });
  }
  return caches;
}

/**
 * Why the plain layout cannot feed these rows in one pass: a row with fewer tokens than the longest needs a
 * cache, since its padded slots must see something (an empty row's would see only masked columns).
 */
function raggedPlainRefusal(counts: readonly number[], lengths: readonly number[]): string | undefined {
  const n = Math.max(...counts);
  return counts.some((count, b) => count < n && lengths[b] === 0) ? 'a batched pass feeds fewer tokens than the longest row only to sequences with a cache' : undefined;
}

/**
 * Why the fused layout cannot: onnxruntime's GroupQueryAttention takes several positions per row only as
 * first prompts of one length.
 */
function fusedRefusal(counts: readonly number[], lengths: readonly number[]): string | undefined {
  const n = counts[0]!;
  if (counts.every((c) => c === n) && (n === 1 || lengths.every((l) => l === 0))) return undefined;
  return 'a fused batched pass feeds one token to each row, or as many to each of several empty sequences';
}

/** The fused layout's batch buffers `[batch, kv_heads, capacity, head_dim]`, each row's positions from the left. */
function gatherRightFree(model: DecoderModel, rows: readonly BatchRow[], capacity: number): Record<string, OrtTensor> {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  const buffers: Record<string, OrtTensor> = {};
  for (const name of model.io.pastNames) buffers[name] = new ort.Tensor('float32', model.kvPool.take(rows.length * heads * capacity * headDim), [rows.length, heads, capacity, headDim]);
  rows.forEach((row, b) => copyRowCache(buffers, b, row.sequence));
  return buffers;
}

/** Copies `sequence`'s cache (its positions, from the left) into row `b` of the batch buffers. */
function copyRowCache(buffers: Record<string, OrtTensor>, b: number, sequence: DecoderSequence): void {
  for (const [name, buffer] of Object.entries(buffers)) {
    const [, heads, capacity, headDim] = buffer.dims as [number, number, number, number];
    const data = buffer.data as Float32Array;
    const own = sequence.cache[name]!;
    const from = own.data as Float32Array;
    const ownCapacity = own.dims[2]!;
    for (let h = 0; h < heads; h++) data.set(from.subarray(h * ownCapacity * headDim, (h * ownCapacity + sequence.length) * headDim), (b * heads + h) * capacity * headDim);
  }
}

/** Copies each row's `n` new positions from the batch buffers into its own buffer, where a lone append writes them. */
function scatterNewPositions(model: DecoderModel, rows: readonly BatchRow[], buffers: Record<string, OrtTensor>, lengths: readonly number[], n: number): void {
  const { numKvHeads: heads } = model.pack;
  const headDim = model.cacheHeadDim;
  for (const name of model.io.pastNames) {
    const data = buffers[name]!.data as Float32Array;
    const capacity = buffers[name]!.dims[2]!;
    rows.forEach((row, b) => {
      if (row.sequence.isDisposed) return;
      const own = row.sequence.cache[name]!;
      const to = own.data as Float32Array;
      const ownCapacity = own.dims[2]!;
      const at = lengths[b]!;
      for (let h = 0; h < heads; h++) {
        const start = ((b * heads + h) * capacity + at) * headDim;
        to.set(data.subarray(start, start + n * headDim), (h * ownCapacity + at) * headDim);
      }
    });
  }
}
