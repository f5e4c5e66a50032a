/**
 * The fused KV layout (onnxruntime's GroupQueryAttention, `seqlens_k` and `total_sequence_length`): a
 * sequence's cache is one float32 buffer `[1, kv_heads, capacity, head_dim]` per cache tensor, its
 * positions from the left (kv-buffer.ts: why the buffers grow in steps, and how a pass's new positions
 * reach them).
 *
 * A batched pass feeds one buffer `[batch, kv_heads, capacity, head_dim]` per cache tensor, each row's
 * positions from the left and the free space on the right; `seqlens_k` gives each row its length. Each
 * row's new positions are copied into the row's own buffer, where a lone append would have written them:
 * from `new_key_values.*`, or with an older graph from the batch buffers, fetched back as present.* and
 * written in place. Rows feed one token each, or as many to each of several empty sequences (their first
 * prompts): the op takes several positions for several rows only then. The batch buffers are kept for
 * the next pass where the scheduler keeps them (kept-batch.ts), else they go back to the model's pool.
 *
 * @example
 * const layout = new FusedLayout(model);
 * const cache = layout.grown(layout.emptyCache(), 0, 40); // buffers of 64 positions
 */
import { newKeyValuesName } from './decoder-io.ts';
import type { KeptBatch } from './kept-batch.ts';
import { growKvBuffers, kvCapacity, newPositionFetches, sharedFetches, writeNewPositions } from './kv-buffer.ts';
import { batchCapacity, type BatchShape, type KvCache, type KvLayout, type KvModel, type KvRow } from './kv-layout.ts';
import type { KvSnapshot } from './kv-snapshot.ts';
import { ort, type OrtTensor } from './ort.ts';

export class FusedLayout implements KvLayout {
  readonly name = 'fused';
  /** GroupQueryAttention refuses a batch of several positions per row once a cache exists ("batch_size must be 1 when sequence_length > 1 and past context is given"). */
  readonly raggedRows = false;

  constructor(private readonly model: KvModel) {}

  exportRefusal(): undefined {
    return undefined;
  }

  rowsRefusal(counts: readonly number[], lengths: readonly number[]): string | undefined {
    const n = counts[0]!;
    if (counts.every((c) => c === n) && (n === 1 || lengths.every((l) => l === 0))) return undefined;
    return 'a fused batched pass feeds one token to each row, or as many to each of several empty sequences';
  }

  /** Nothing yet: the buffers are made on the first append, at the capacity it needs. */
  emptyCache(): KvCache {
    return {};
  }

  /**
   * Buffers for `total` positions: made on the first append, grown (copying the cache once) when
   * outgrown. A checkpoint keeps the old buffers, whose first positions are still valid, so a rollback
   * across a growth stays correct.
   */
  grown(cache: Readonly<KvCache>, length: number, total: number): KvCache | undefined {
    const { pack, io } = this.model;
    const current = cache[io.pastNames[0]!]?.dims[2] ?? 0;
    if (total <= current) return undefined;
    const grown = growKvBuffers(
      cache,
      io.pastNames,
      pack.numKvHeads,
      this.model.cacheHeadDim,
      kvCapacity(total, current, pack.maxPositions),
      length,
      this.allocate,
    );
    this.model.stats.kvBytesCopied += length * this.model.kvBytesPerPosition;
    return grown;
  }

  /** Copies in buffers of the capacity an append of `reserve` positions would have made. */
  restored(snapshot: KvSnapshot, length: number, reserve: number): KvCache {
    const { pack, io } = this.model;
    return growKvBuffers(
      snapshot.kv,
      io.pastNames,
      pack.numKvHeads,
      this.model.cacheHeadDim,
      kvCapacity(Math.max(length, reserve), 0, pack.maxPositions),
      length,
      this.allocate,
    );
  }

  /** A buffer goes back to the model's pool. */
  drop(tensor: OrtTensor): void {
    if (tensor.data instanceof Float32Array) this.model.kvPool.release(tensor.data);
    tensor.dispose();
  }

  /** Fetches only the new positions and writes them into the buffers, or, with an older graph, fetches the buffers themselves as present.*, written in place. */
  async runAlone(cache: Readonly<KvCache>, start: number, n: number, feeds: Record<string, OrtTensor>): Promise<{ out: Record<string, OrtTensor> }> {
    const { io, hasHiddenStates } = this.model;
    const total = start + n;
    feeds.seqlens_k = new ort.Tensor('int32', Int32Array.of(total - 1), [1]);
    feeds.total_sequence_length = new ort.Tensor('int32', Int32Array.of(total), []);
    const fetches = io.newKeyValues ? newPositionFetches(io.pastNames, hasHiddenStates) : sharedFetches(cache, hasHiddenStates);
    const out = await this.model.forward({ ...cache, ...feeds }, n, fetches);
    if (io.newKeyValues) {
      for (const name of io.pastNames) {
        const added = out[newKeyValuesName(name)]!;
        writeNewPositions(cache[name]!, added, 0, start);
        added.dispose();
        delete out[newKeyValuesName(name)];
      }
    }
    return { out };
  }

  async runBatch<T>(
    rows: readonly KvRow[],
    shape: BatchShape,
    feeds: Record<string, OrtTensor>,
    kept: KeptBatch<KvRow> | undefined,
    collect: (out: Record<string, OrtTensor>) => T,
  ): Promise<T> {
    const { io, hasHiddenStates, kvPool } = this.model;
    const { lengths, n, total } = shape;
    for (const row of rows) row.fit(row.length + n);
    // The kept batch buffers, with the rows that do not hold their sequence as it is copied in (kept-batch.ts);
    // else each row's cache gathered, in whole capacity steps so that the pool's buffers of one pass fit the next ones.
    const reused = kept?.buffersFor(rows, total, kvPool);
    for (const b of reused?.copy ?? []) copyRowCache(reused!.buffers, b, rows[b]!);
    const buffers = reused?.buffers ?? this.gatherRightFree(rows, batchCapacity(total));
    Object.assign(feeds, buffers);
    feeds.seqlens_k = new ort.Tensor(
      'int32',
      Int32Array.from(lengths, (l) => l + n - 1),
      [rows.length],
    );
    feeds.total_sequence_length = new ort.Tensor('int32', Int32Array.of(total), []);
    let out: Record<string, OrtTensor>;
    try {
      if (io.newKeyValues) {
        out = await this.model.forward(feeds, rows.length * n, newPositionFetches(io.pastNames, hasHiddenStates));
        for (const name of io.pastNames) {
          const added = out[newKeyValuesName(name)]!;
          rows.forEach((row, b) => row.isDisposed || writeNewPositions(row.cache[name]!, added, b, lengths[b]!));
          // The batch buffers too, where the next passes read them.
          if (kept) rows.forEach((_, b) => writeNewPositions(buffers[name]!, added, b, lengths[b]!, b));
        }
      } else {
        // The batch buffers were written in place: only the rows' own buffers need the new positions.
        out = await this.model.forward(feeds, rows.length * n, sharedFetches(buffers, hasHiddenStates));
        this.scatterNewPositions(rows, buffers, lengths, n);
      }
    } catch (e) {
      kept?.drop();
      throw e;
    }
    const result = collect(out);
    // After `collect` recorded the rows' tokens: the kept rows note each sequence's revision as it is now.
    if (kept) kept.keep(rows, buffers);
    else for (const buffer of Object.values(buffers)) kvPool.release(buffer.data as Float32Array);
    return result;
  }

  private readonly allocate = (elements: number): Float32Array => this.model.kvPool.take(elements);

  /** The batch buffers `[batch, kv_heads, capacity, head_dim]`, each row's positions from the left. */
  private gatherRightFree(rows: readonly KvRow[], capacity: number): KvCache {
    const { numKvHeads: heads } = this.model.pack;
    const headDim = this.model.cacheHeadDim;
    const buffers: KvCache = {};
    for (const name of this.model.io.pastNames)
      buffers[name] = new ort.Tensor('float32', this.model.kvPool.take(rows.length * heads * capacity * headDim), [rows.length, heads, capacity, headDim]);
    rows.forEach((row, b) => copyRowCache(buffers, b, row));
    return buffers;
  }

  /** Copies each row's `n` new positions from the batch buffers into its own buffer, where a lone append writes them. */
  private scatterNewPositions(rows: readonly KvRow[], buffers: KvCache, lengths: readonly number[], n: number): void {
    const { numKvHeads: heads } = this.model.pack;
    const headDim = this.model.cacheHeadDim;
    for (const name of this.model.io.pastNames) {
      const data = buffers[name]!.data as Float32Array;
      const capacity = buffers[name]!.dims[2]!;
      rows.forEach((row, b) => {
        if (row.isDisposed) return;
        const own = row.cache[name]!;
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
}

/** Copies `row`'s cache (its positions, from the left) into row `b` of the batch buffers. */
function copyRowCache(buffers: KvCache, b: number, row: KvRow): void {
  for (const [name, buffer] of Object.entries(buffers)) {
    const [, heads, capacity, headDim] = buffer.dims as [number, number, number, number];
    const data = buffer.data as Float32Array;
    const own = row.cache[name]!;
    const from = own.data as Float32Array;
    const ownCapacity = own.dims[2]!;
    for (let h = 0; h < heads; h++)
      data.set(from.subarray(h * ownCapacity * headDim, (h * ownCapacity + row.length) * headDim), (b * heads + h) * capacity * headDim);
  }
}
