/**
 * The plain KV layout (attention_mask, position_ids; `present.*` as long as the past and the new
 * positions): a sequence's cache is the `present.*` of its last pass, fed back as it came, in the
 * export's own element type.
 *
 * A batched pass LEFT-pads the rows' caches to the longest, and each row's new tokens sit at the end of
 * the new slots, after padding of their own; padded slots get attention_mask 0 and each row its own
 * position ids, as Hugging Face's batched generation feeds them, so every row's last position is the
 * pass's last. Rows may feed different numbers of tokens (a cloud step's ten-odd beside a decode step's
 * one). Each row's new cache is its slices of `present.*`, without the padding. The gathered batch and
 * the rows' new caches come from the model's pool, so a pass writes into memory already mapped.
 *
 * @example
 * const layout = new PlainLayout(model);
 * layout.passBytes([40, 90], [1, 1]); // pool bytes a pass of two rows, one token each, writes into
 */
import { emptyTensor, feedable, indexTensor } from './float-tensors.ts';
import { copyKvPositions, sharedKvTensor, type KvSnapshot } from './kv-snapshot.ts';
import { batchCapacity, type BatchShape, type KvCache, type KvLayout, type KvModel, type KvRow } from './kv-layout.ts';
import { ort, type OrtTensor } from './ort.ts';

type CacheData = Float32Array | Uint16Array;

/** A cache tensor's elements as stored: float32, or float16 as raw bits (see float-tensors.ts's `feedable`). */
function cacheData(tensor: OrtTensor): CacheData {
  const data = tensor.data as ArrayBufferView;
  if (data instanceof Float32Array) return data;
  return new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2);
}

/**
 * Bytes of the model's pool a pass over sequences of `lengths`, fed `counts` tokens each (one when
 * omitted), writes into: the batch buffers the rows' caches are gathered into, and each row's new cache
 * split out of `present.*`. Between passes the pool holds both, one pass's gathered buffers and the caches
 * the next pass replaces, so a pass needing more than the pool holds copies into fresh memory.
 */
export function plainPassPoolBytes(
  model: Pick<KvModel, 'kvBytesPerPosition'>,
  lengths: readonly number[],
  counts: readonly number[] = lengths.map(() => 1),
): number {
  const gathered = lengths.length * batchCapacity(Math.max(...lengths));
  const split = lengths.reduce((sum, length, b) => sum + batchCapacity(length + counts[b]!), 0);
  return model.kvBytesPerPosition * (gathered + split);
}

export class PlainLayout implements KvLayout {
  readonly name = 'plain';
  readonly raggedRows = true;
  readonly passBytes = (lengths: readonly number[], counts: readonly number[]) => plainPassPoolBytes(this.model, lengths, counts);

  constructor(private readonly model: KvModel) {}

  exportRefusal(): string | undefined {
    const { io } = this.model;
    return io.mask && io.positions ? undefined : 'the export takes no attention_mask or no position_ids, which left-padded rows need';
  }

  /** A row with fewer tokens than the longest needs a cache: its padded slots must see something (an empty row's would see only masked columns). */
  rowsRefusal(counts: readonly number[], lengths: readonly number[]): string | undefined {
    const n = Math.max(...counts);
    return counts.some((count, b) => count < n && lengths[b] === 0)
      ? 'a batched pass feeds fewer tokens than the longest row only to sequences with a cache'
      : undefined;
  }

  emptyCache(): KvCache {
    const { io, pack } = this.model;
    return Object.fromEntries(io.pastNames.map((name) => [name, emptyTensor(io.cache, [1, pack.numKvHeads, 0, this.model.cacheHeadDim])]));
  }

  /** Each pass returns a new cache of the length it needs: nothing to grow. */
  grown(): undefined {
    return undefined;
  }

  /** The snapshot's own memory when restored whole (a plain cache is only ever read), a compact copy otherwise. */
  restored(snapshot: KvSnapshot, length: number): KvCache {
    return Object.fromEntries(
      this.model.io.pastNames.map((name) => {
        const held = snapshot.kv[name]!;
        return [name, held.dims[2] === length ? sharedKvTensor(held) : copyKvPositions(held, length)];
      }),
    );
  }

  /** onnxruntime's own outputs go to the garbage collector; a cache a batched pass split into pooled memory goes back to the pool. */
  drop(tensor: OrtTensor): void {
    if (ArrayBuffer.isView(tensor.data)) this.model.kvPool.releaseBufferOf(tensor.data);
    tensor.dispose();
  }

  async runAlone(
    cache: Readonly<KvCache>,
    _start: number,
    n: number,
    feeds: Record<string, OrtTensor>,
  ): Promise<{ out: Record<string, OrtTensor>; cache: KvCache }> {
    const out = await this.model.forward({ ...cache, ...feeds }, n);
    const next: KvCache = {};
    for (const name of Object.keys(cache)) next[name] = feedable(out[name.replace('past_key_values', 'present')]!);
    return { out, cache: next };
  }

  async runBatch<T>(
    rows: readonly KvRow[],
    shape: BatchShape,
    feeds: Record<string, OrtTensor>,
    _kept: unknown,
    collect: (out: Record<string, OrtTensor>, present: KvCache[]) => T,
  ): Promise<T> {
    const { io } = this.model;
    const { lengths, counts, n, longest, total } = shape;
    const batch = rows.length;
    const gathered = this.gatherLeftPadded(rows, longest);
    Object.assign(feeds, gathered);
    // Row b's cache sits in the last lengths[b] of the `longest` past slots, its tokens in the last counts[b]
    // of the n new ones: the slots before each are padding, which the mask hides.
    const seen = (b: number, column: number) => (column < longest ? column >= longest - lengths[b]! : column - longest >= n - counts[b]!);
    feeds.attention_mask = indexTensor(io.mask!, { length: batch * total }, [batch, total], (i) => (seen(Math.floor(i / total), i % total) ? 1 : 0));
    feeds.position_ids = indexTensor(io.positions!, { length: batch * n }, [batch, n], (i) => {
      const b = Math.floor(i / n);
      return lengths[b]! + Math.max(0, (i % n) - (n - counts[b]!));
    });
    let out: Record<string, OrtTensor>;
    try {
      out = await this.model.forward(feeds, batch * n);
    } finally {
      for (const tensor of Object.values(gathered)) this.drop(tensor);
    }
    return collect(out, this.splitLeftPadded(out, shape));
  }

  /**
   * A zeroed `[rows, kv_heads, positions, head_dim]` cache tensor: float32 ones are the first part of a
   * buffer from the model's pool with room for a whole number of capacity steps, so the next passes, a
   * position longer, find the same sizes there (fresh memory costs more than the copy into it: every page
   * faults in and is zeroed on first touch, kv-buffer-pool.ts). A float16 cache's bits
   * sit in a float32 buffer of half the elements (the pool holds float32 arrays; the memory is what matters).
   */
  private cacheTensor(like: CacheData, dims: readonly [number, number, number, number]): OrtTensor {
    const [rows, heads, positions, headDim] = dims;
    const size = rows * heads * positions * headDim;
    const room = rows * heads * batchCapacity(positions) * headDim;
    if (like instanceof Float32Array) return new ort.Tensor('float32', this.model.kvPool.take(room).subarray(0, size), dims);
    const buffer = this.model.kvPool.take(Math.ceil(room / 2)).buffer;
    return feedable(new ort.Tensor('float16', new Uint16Array(buffer, 0, size), dims));
  }

  /** `past_key_values.*` of the batch `[batch, kv_heads, longest, head_dim]`, each row's cache at the right end. */
  private gatherLeftPadded(rows: readonly KvRow[], longest: number): KvCache {
    const { numKvHeads: heads } = this.model.pack;
    const headDim = this.model.cacheHeadDim;
    const feeds: KvCache = {};
    for (const name of this.model.io.pastNames) {
      const tensor = this.cacheTensor(cacheData(rows[0]!.cache[name]!), [rows.length, heads, longest, headDim]);
      const data = cacheData(tensor);
      rows.forEach((row, b) => {
        const { length } = row;
        const from = cacheData(row.cache[name]!);
        for (let h = 0; h < heads; h++)
          data.set(from.subarray(h * length * headDim, (h + 1) * length * headDim), ((b * heads + h) * longest + longest - length) * headDim);
      });
      feeds[name] = tensor;
    }
    return feeds;
  }

  /** Each row's new cache `[1, kv_heads, length + count, head_dim]`: its slices of `present.*` (its past, then its new positions), without the padding before either. */
  private splitLeftPadded(out: Record<string, OrtTensor>, { lengths, counts, n, longest, total }: BatchShape): KvCache[] {
    const { numKvHeads: heads } = this.model.pack;
    const headDim = this.model.cacheHeadDim;
    const caches = lengths.map(() => ({}) as KvCache);
    for (const name of this.model.io.pastNames) {
      const data = cacheData(out[name.replace('past_key_values', 'present')]!);
      lengths.forEach((length, b) => {
        const count = counts[b]!;
        const tensor = this.cacheTensor(data, [1, heads, length + count, headDim]);
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
}
