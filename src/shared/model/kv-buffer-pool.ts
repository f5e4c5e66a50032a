/**
 * Released fused-layout KV buffers, kept for the next buffer of the same size. A fresh buffer of
 * megabytes costs more than the copy into it: every page is faulted in and zeroed on first touch, where
 * pages already mapped take only the copy. Sequences come and go with buffers of a few sizes (capacities
 * are whole KV_CAPACITY_STEPs), so a restore, a growth, a new generation's first append and a batched step's
 * batch buffer mostly find one here.
 *
 * Where a take finds nothing of its size and the size is large (SPARE_MIN_BYTES), the pool asks `makeSpare`
 * for one spare of it, made off the decoding thread (prefaulted-buffers.ts), so the next take of that size
 * finds memory already mapped: a prompt cache's snapshot keeps its sequence's buffer for good, so
 * without spares every restore and every new long prompt would write into fresh pages. Spares count
 * towards the bound while they are being made.
 *
 * A buffer is recycled only when nothing can read it again: its sequence's checkpoints are handled by the
 * caller (it releases only what no checkpoint holds), and a buffer a prefix-cache snapshot shares is
 * pinned and never recycled. The pool holds at most `maxBytes`, dropping the least recently released.
 *
 * @example
 * const pool = new KvBufferPool(64 * 2 ** 20, prefaultedBuffer);
 * const data = pool.take(2 * 256 * 64); // zeros, recycled or new (and a spare of that size on its way)
 * pool.release(data); // back for the next take of that size
 */

/** Makes a zeroed buffer of `elements` float32s, its memory already written. */
export type SpareMaker = (elements: number) => Promise<Float32Array>;

/** Sizes below this are not worth a spare: small arrays come from memory the allocator already holds. */
export const SPARE_MIN_BYTES = 256 * 1024;
export class KvBufferPool {
  /** Released buffers, least recently released first. */
  /**
   * Released buffers by memory, least recently released first (a Map keeps insertion order), and the same
   * by size, most recent last: a plain-layout batched pass of a small model takes and releases thousands of
   * small buffers, so neither a take nor a release may scan them all.
   */
  private readonly free = new Map<ArrayBufferLike, Float32Array>();
  private readonly freeBySize = new Map<number, Float32Array[]>();
  private readonly pinned = new WeakSet<ArrayBufferLike>();
  /** The memory of every buffer `take` handed out: a view of one can bring its whole buffer back (releaseBufferOf). */
  private readonly issued = new WeakSet<ArrayBufferLike>();
  private bytes = 0;
  /** Bytes of spares asked for and not yet arrived. */
  private pendingBytes = 0;
  readonly stats = { taken: 0, reused: 0, sparesAsked: 0 };

  constructor(
    readonly maxBytes: number,
    private readonly makeSpare?: SpareMaker,
  ) {
    if (!Number.isFinite(maxBytes) || maxBytes < 0) throw new RangeError(`maxBytes must be a non-negative number, got ${maxBytes}`);
  }

  /** A buffer of `elements` zeros: the most recently released one of that size (zeroed here), or a new one. */
  take(elements: number): Float32Array {
    this.stats.taken++;
    const recycled = this.freeBySize.get(elements)?.pop();
    if (!recycled) {
      this.askSpare(elements);
      const fresh = new Float32Array(elements);
      this.issued.add(fresh.buffer);
      return fresh;
    }
    this.free.delete(recycled.buffer);
    this.bytes -= recycled.byteLength;
    this.stats.reused++;
    this.issued.add(recycled.buffer);
    return recycled.fill(0);
  }

  /** Asks for one spare of a large size, while the bound leaves room for it; a failed maker costs nothing but the spare. */
  private askSpare(elements: number): void {
    const bytes = elements * Float32Array.BYTES_PER_ELEMENT;
    if (!this.makeSpare || bytes < SPARE_MIN_BYTES || this.bytes + this.pendingBytes + bytes > this.maxBytes) return;
    this.pendingBytes += bytes;
    this.stats.sparesAsked++;
    this.makeSpare(elements).then(
      (spare) => {
        this.pendingBytes -= bytes;
        this.release(spare);
      },
      () => (this.pendingBytes -= bytes),
    );
  }

  /** Marks `data`'s memory as read elsewhere (a snapshot shares it): it is never recycled. */
  pin(data: ArrayBufferView): void {
    this.pinned.add(data.buffer);
  }

  /** Hands back a buffer nothing will read again; pinned ones, and views into larger memory, are left to the garbage collector. */
  release(data: Float32Array): void {
    if (this.pinned.has(data.buffer) || data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength || this.free.has(data.buffer)) return;
    this.free.set(data.buffer, data);
    const sameSize = this.freeBySize.get(data.length) ?? [];
    sameSize.push(data);
    this.freeBySize.set(data.length, sameSize);
    this.bytes += data.byteLength;
    for (const [buffer, oldest] of this.free) {
      if (this.bytes <= this.maxBytes) break;
      this.free.delete(buffer);
      const stack = this.freeBySize.get(oldest.length)!;
      // The least recently released of its size sits at the bottom of its stack.
      stack.splice(stack.indexOf(oldest), 1);
      this.bytes -= oldest.byteLength;
    }
  }

  /**
   * Hands back the whole buffer `view` was cut from, where `take` handed that buffer out: a tensor over the
   * first part of a larger buffer (the plain layout's batched caches, kv-plain-layout.ts) returns it all.
   * Memory the pool never issued (onnxruntime's outputs) is left to the garbage collector.
   */
  releaseBufferOf(view: ArrayBufferView): void {
    if (this.issued.has(view.buffer)) this.release(new Float32Array(view.buffer));
  }

  /** Bytes held for reuse. */
  get heldBytes(): number {
    return this.bytes;
  }
}
