/**
 * The fused layout's batch buffers, kept from one pass to the next. Consecutive decode passes mostly run
 * the same sequences (the same users, each a token further), and gathering every row's whole cache into
 * batch buffers again each pass costs more than the pass itself once contexts are long (docs/model-packs.md,
 * "Batched decoding").
 *
 * So the buffers stay, each row holding one sequence's positions, as llama.cpp's server keeps a slot per
 * sequence. After a pass each row's new positions are written into them as into the row's own buffer
 * (kv-fused-layout.ts). A pass feeds its first rows: a sequence already in one of them stays there, the
 * others take the rows left (the scheduler's policy orders them so, scheduler/decode-policy.ts), and only
 * a row that does not hold its sequence as it is now is copied, from the sequence's own buffer: a sequence new to the buffers, or one whose row another took, or one something
 * else changed since (a rollback, a lone append: its `revision` moved). A user who sits out a pass (its
 * routed token on the network) costs at most two rows' copies (none when it held the last row), not a gather
 * of every row. A pass of more rows than the buffers have, or past their capacity, gathers new ones, and the
 * old go back to the pool. What a pass feeds is the same either way: each row's positions from the left,
 * and beyond them zeros or positions the row held before (of its sequence or an earlier one), which
 * seqlens_k keeps the attention from reading.
 *
 * The cost is memory: between passes the buffers hold a second copy of the rows' caches, as gathered
 * buffers did during each pass, until the sequences are gone or a gather replaces them.
 *
 * @example
 * const rows = inKeptRows(steps, kept.heldRows);                                // row order for the pass (scheduler/decode-policy.ts)
 * const reused = kept.buffersFor(rows.map((s) => s.sequence), total, pool);     // undefined: gather new ones
 * if (reused) for (const b of reused.copy) copyRowCache(reused.buffers, b, rows[b].sequence);
 */
import type { KvBufferPool } from './kv-buffer-pool.ts';
import { ort, type OrtTensor } from './ort.ts';

/** What the rows hold: a sequence (DecoderSequence), known by identity, whose revision moves when its cache changes. */
export interface KeptSequence {
  readonly revision: number;
  readonly isDisposed: boolean;
}

interface Row<S> {
  sequence: S;
  /** The sequence's revision when the row last matched it; -1 while it does not (a copy is due). */
  revision: number;
}

/** Where a KeptBatch counts the passes that fed its buffers and the rows it copied in (the scheduler's stats). */
export interface KeptBatchCounts {
  keptBuffersReused: number;
  keptRowsCopied: number;
}

export class KeptBatch<S extends KeptSequence> {
  /** What each row of the buffers holds; undefined where nothing does. */
  private rows: (Row<S> | undefined)[] = [];
  private buffers: Record<string, OrtTensor> | undefined;
  /** The views of `buffers` the last `buffersFor` handed out: `keep` knows them from newly gathered buffers. */
  private lastFed: Record<string, OrtTensor> | undefined;

  constructor(private readonly counts: KeptBatchCounts = { keptBuffersReused: 0, keptRowsCopied: 0 }) {}

  /** The sequence each row holds, in row order (undefined where none does). */
  get heldRows(): readonly (S | undefined)[] {
    return this.rows.map((r) => r?.sequence);
  }

  /**
   * The kept buffers' first `sequences.length` rows for a pass over `sequences` (row b for sequences[b])
   * of `total` positions, with the rows to copy from their sequences first (`copy`); undefined when the
   * buffers have too few rows or too little room, and then the kept buffers go back to `pool`.
   */
  buffersFor(sequences: readonly S[], total: number, pool: KvBufferPool): { buffers: Record<string, OrtTensor>; copy: number[] } | undefined {
    const [rowsHeld, , capacity] = this.buffers ? Object.values(this.buffers)[0]!.dims : [];
    if (!this.buffers || rowsHeld! < sequences.length || capacity! < total) {
      this.drop(pool);
      return undefined;
    }
    const copy: number[] = [];
    sequences.forEach((sequence, b) => {
      const row = this.rows[b];
      if (row?.sequence === sequence && row.revision === sequence.revision) return;
      // Moving here: the row it held before no longer has its positions.
      this.rows = this.rows.map((r, j) => (r?.sequence === sequence && j !== b ? undefined : r));
      this.rows[b] = { sequence, revision: -1 };
      copy.push(b);
    });
    this.counts.keptBuffersReused++;
    this.counts.keptRowsCopied += copy.length;
    this.lastFed = sequences.length === rowsHeld ? this.buffers : firstRows(this.buffers, sequences.length);
    return { buffers: this.lastFed, copy };
  }

  /**
   * After a pass over `sequences` (their revisions read now, after the pass recorded its tokens): the rows
   * hold them as they are. `buffers` are what the pass fed: the kept ones, or newly gathered ones that
   * replace them.
   */
  keep(sequences: readonly S[], buffers: Record<string, OrtTensor>): void {
    if (buffers !== this.lastFed) {
      this.buffers = buffers;
      this.rows = [];
    }
    this.lastFed = undefined;
    sequences.forEach((sequence, b) => (this.rows[b] = sequence.isDisposed ? undefined : { sequence, revision: sequence.revision }));
  }

  /** Lets go of the kept buffers: back to `pool`, or, without one, to the garbage collector (a failed pass may have left them half written). */
  drop(pool?: KvBufferPool): void {
    if (pool) for (const buffer of Object.values(this.buffers ?? {})) pool.release(buffer.data as Float32Array);
    this.buffers = undefined;
    this.lastFed = undefined;
    this.rows = [];
  }

  /**
   * Frees `sequence`'s row (it was disposed); the buffers go to the garbage collector once no row holds a
   * sequence. Never to the pool here: onnxruntime-node starts a run on a later turn of the event loop, so
   * a pass may still read them.
   */
  forget(sequence: S): void {
    this.rows = this.rows.map((r) => (r?.sequence === sequence ? undefined : r));
    if (this.rows.every((r) => r === undefined)) {
      this.buffers = undefined;
      this.rows = [];
    }
  }
}

/** Views of the first `count` rows of `[rows, kv_heads, capacity, head_dim]` buffers: rows are contiguous, nothing is copied. */
function firstRows(buffers: Record<string, OrtTensor>, count: number): Record<string, OrtTensor> {
  const views: Record<string, OrtTensor> = {};
  for (const [name, buffer] of Object.entries(buffers)) {
    const [rows, heads, capacity, headDim] = buffer.dims as [number, number, number, number];
    const data = buffer.data as Float32Array;
    views[name] = new ort.Tensor('float32', data.subarray(0, (data.length / rows) * count), [count, heads, capacity, headDim]);
  }
  return views;
}
