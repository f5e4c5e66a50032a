/**
 * The fused layout's batch buffers, kept from one pass to the next. Consecutive decode passes mostly run
 * the same sequences (the same users, each a token further), and gathering every row's whole cache into
 * batch buffers again each pass costs more than the pass itself once contexts are long: at the
 * Qwen2.5-0.5B shape, q4, 2 cores, four rows of 1,000 positions copy about 100 MB a pass, and a pass took
 * 170–215 ms where onnxruntime's run took 61–79 ms (the four steps one after another: 80 ms).
 *
 * So after a pass its buffers stay here, each row's new positions written into them as into the row's own
 * buffer (batched-step.ts). The next pass over the same sequences in the same order, within the buffers'
 * capacity, feeds them again; only a row whose sequence something else changed since (a rollback, a lone
 * append: its `revision` moved) is copied again. Another set of sequences gathers anew, and the old buffers
 * go back to the model's pool. What a pass feeds is the same either way: each row's positions from the
 * left, and beyond them zeros or positions the row held before a rollback, which seqlens_k keeps the
 * attention from reading.
 *
 * The cost is memory: between passes the buffers hold a second copy of the rows' caches, as gathered
 * buffers did during each pass.
 *
 * @example
 * const pass = kept.inKeptOrder(steps);        // the kept rows' order, when it is the same sequences
 * const reused = kept.buffersFor(pass.map((s) => s.sequence), total, pool); // undefined: gather them
 */
import type { DecoderSequence } from './decoder-model.ts';
import type { KvBufferPool } from './kv-buffer-pool.ts';
import type { OrtTensor } from './ort.ts';

interface KeptRow {
  sequence: DecoderSequence;
  /** The sequence's revision right after the pass: any change since makes the row stale. */
  revision: number;
}

export class KeptBatch {
  private rows: KeptRow[] = [];
  private buffers: Record<string, OrtTensor> | undefined;
  /** Passes that fed the kept buffers, and passes that gathered theirs. */
  readonly stats = { reused: 0, gathered: 0 };

  /** `steps` in the kept buffers' row order when they are the same sequences; else as they are. */
  inKeptOrder<T extends { sequence: DecoderSequence }>(steps: T[]): T[] {
    if (steps.length !== this.rows.length) return steps;
    const slot = new Map(this.rows.map((r, i) => [r.sequence, i]));
    if (steps.some((s) => !slot.has(s.sequence))) return steps;
    return [...steps].sort((a, b) => slot.get(a.sequence)! - slot.get(b.sequence)!);
  }

  /**
   * The kept buffers when `sequences` are the kept rows in their order and the buffers hold `total`
   * positions, with the rows whose sequence changed since (a rollback, a lone append) to copy again; else
   * undefined, and the kept buffers go back to `pool` (the caller gathers new ones).
   */
  buffersFor(sequences: readonly DecoderSequence[], total: number, pool: KvBufferPool): { buffers: Record<string, OrtTensor>; stale: number[] } | undefined {
    const buffers = this.buffers;
    const fits = buffers !== undefined && Object.values(buffers)[0]!.dims[2]! >= total;
    if (fits && sequences.length === this.rows.length && sequences.every((s, b) => this.rows[b]!.sequence === s)) {
      this.stats.reused++;
      return { buffers, stale: sequences.flatMap((s, b) => (s.revision === this.rows[b]!.revision ? [] : [b])) };
    }
    this.stats.gathered++;
    this.drop(pool);
    return undefined;
  }

  /** Keeps `buffers` after a pass over `sequences` (their revisions read now, after the pass recorded its tokens). */
  keep(sequences: readonly DecoderSequence[], buffers: Record<string, OrtTensor>): void {
    this.buffers = buffers;
    this.rows = sequences.map((sequence) => ({ sequence, revision: sequence.revision }));
  }

  /** Lets go of the kept buffers: back to `pool`, or, without one, to the garbage collector (a failed pass may have left them half written). */
  drop(pool?: KvBufferPool): void {
    if (pool) for (const buffer of Object.values(this.buffers ?? {})) pool.release(buffer.data as Float32Array);
    this.buffers = undefined;
    this.rows = [];
  }

  /**
   * Forgets the kept rows when `sequence` is one of them (it was disposed). The buffers stay until the
   * next pass gathers anew or the pass now running ends: onnxruntime-node starts a run on a later turn of
   * the event loop, so a pass may still read them.
   */
  forget(sequence: DecoderSequence): void {
    if (this.rows.some((r) => r.sequence === sequence)) this.rows = [];
  }
}
