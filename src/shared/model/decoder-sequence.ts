/**
 * One generation's KV cache on a DecoderModel: it grows by exactly the tokens appended, so nothing is
 * ever re-prefilled, and it can return to a checkpoint. `append` runs one forward pass of this sequence
 * alone; a scheduler (scheduler/decode-scheduler.ts) runs it in passes shared with other sequences through
 * the same cache API a lone pass uses: `cache`, `fit`, `record`, `revision`, `isDisposed`.
 *
 * @example
 * const seq = model.newSequence();
 * const { logits, hidden } = await seq.append([1]);
 * seq.checkpoint(); await seq.append([guess]); seq.rollback(); // the cache holds what it held before
 * seq.dispose();
 */
import { checkAppend } from './append-checks.ts';
import type { AppendableSequence, AppendResult } from './decoder-types.ts';
import { AppError } from '../errors.ts';
import { float32Rows, indexTensor, logitRows, toFloat32 } from './float-tensors.ts';
import type { KvCache, KvRow, LaidOutModel } from './kv-layout.ts';
import { checkRestorable, takeKvSnapshot, type KvSnapshot } from './kv-snapshot.ts';
import { ort, type OrtTensor } from './ort.ts';

const MAX_CHECKPOINTS = 2;

export class DecoderSequence implements AppendableSequence, KvRow {
  private past: KvCache;
  private ids: number[] = [];
  private disposed = false;
  /** The cache as it was at each `checkpoint()`, oldest first: the same tensors, kept alive until `rollback` or `commit`. */
  private saved: { past: KvCache; length: number; lastHidden: Float32Array | undefined }[] = [];
  /** `hidden_states` of the cache's last position (zeros while empty; undefined after a short restore): the next append's `previousHidden`. */
  private lastHidden: Float32Array | undefined;
  /** Changes counted: appends, rollbacks, restores, disposal (see `revision`). */
  private changes = 0;

  constructor(private readonly model: LaidOutModel) {
    this.past = model.layout.emptyCache();
    this.lastHidden = new Float32Array(model.hasHiddenStates ? model.pack.hiddenSize : 0);
  }

  /** Whether `dispose` was called: a batched pass then leaves the sequence alone (it may be disposed while the pass runs). */
  get isDisposed(): boolean {
    return this.disposed;
  }

  get length(): number {
    return this.ids.length;
  }

  get tokens(): readonly number[] {
    return this.ids;
  }

  /**
   * A count that moves whenever the cache's positions may change (an append, a rollback, a restore,
   * disposal): kept batch buffers (kept-batch.ts) are fed again only while it has not moved.
   */
  get revision(): number {
    return this.changes;
  }

  /** The cache tensors as a batched pass reads them (the fused layout's buffers, written in place). */
  get cache(): Readonly<KvCache> {
    return this.past;
  }

  /** Throws what appending `tokens` would throw before any work is queued or run. */
  checkAppend(tokens: readonly number[]): void {
    if (this.disposed) throw new AppError('FAILED_PRECONDITION', 'sequence already disposed');
    checkAppend(this.model.pack, this.ids.length, tokens);
    if (tokens.length === 1 && this.lastHidden === undefined)
      throw new AppError('FAILED_PRECONDITION', 'a sequence restored short of its snapshot needs two or more tokens on its first append');
  }

  /**
   * Feeds `tokens` as one forward pass (a prefill when the cache is empty, a decode step for one
   * token) and returns the outputs of the last position.
   */
  async append(tokens: readonly number[], options: { allPositions?: boolean } = {}): Promise<AppendResult> {
    this.checkAppend(tokens);
    return this.feed(tokens, options);
  }

  /** `append` after its checks: one forward pass of this sequence alone. A scheduler runs prefill pieces through it. */
  async feed(tokens: readonly number[], options: { allPositions?: boolean } = {}): Promise<AppendResult> {
    if (this.disposed) throw new AppError('FAILED_PRECONDITION', 'sequence already disposed');
    const { io, pack, layout } = this.model;
    const { hiddenSize, vocabSize } = pack;
    const n = tokens.length;
    const start = this.ids.length;
    const total = start + n;
    this.fit(total);
    const feeds: Record<string, OrtTensor> = { input_ids: indexTensor(io.ids, tokens, [1, n]) };
    if (io.mask) feeds.attention_mask = indexTensor(io.mask, { length: total }, [1, total], () => 1);
    if (io.positions) feeds.position_ids = indexTensor(io.positions, { length: n }, [1, n], (i) => start + i);
    // The last two positions: where hidden_states is the LM head's input (models expose-hidden) it is cut alike, and previousHidden needs the row before the last.
    if (io.logitsToKeep) feeds.num_logits_to_keep = new ort.Tensor('int64', BigInt64Array.of(options.allPositions ? 0n : BigInt(Math.min(n, 2))), []);
    const { out, cache } = await layout.runAlone(this.past, start, n, feeds);
    if (cache) this.replaceCache(cache);
    this.ids.push(...tokens);
    this.changes++;

    // float16 outputs are converted here, once, and only the rows asked for (a prefill's last position).
    // hidden_states holds every fed position, or the last two when it is the sliced LM head input.
    const hiddenRows = out.hidden_states?.dims[1] ?? 0;
    const hidden = out.hidden_states ? float32Rows(out.hidden_states, (hiddenRows - 1) * hiddenSize, hiddenRows * hiddenSize) : new Float32Array(0);
    const previousHidden =
      out.hidden_states && n >= 2 ? float32Rows(out.hidden_states, (hiddenRows - 2) * hiddenSize, (hiddenRows - 1) * hiddenSize) : this.lastHidden!;
    this.lastHidden = hidden;
    // Logits come for every fed position, or for the last ones kept (num_logits_to_keep).
    const rows = out.logits!.dims[1]!;
    const result: AppendResult = { logits: logitRows(out.logits!, (rows - 1) * vocabSize, rows * vocabSize), hidden, previousHidden };
    if (options.allPositions) {
      result.allLogits = toFloat32(out.logits!);
      result.allHidden = out.hidden_states ? toFloat32(out.hidden_states) : new Float32Array(0);
    }
    out.logits!.dispose();
    out.hidden_states?.dispose();
    return result;
  }

  /**
   * Records a batched pass's tokens (batched-step.ts): `present` is the new cache where the layout makes
   * one (plain; fused: written in place); `previousHidden` the row before the last when the pass fed two
   * or more tokens and has hidden_states. Returns the append's previousHidden.
   */
  record(tokens: readonly number[], present: KvCache | undefined, hidden: Float32Array, previousHidden?: Float32Array): Float32Array {
    if (present) this.replaceCache(present);
    this.ids.push(...tokens);
    this.changes++;
    // append() refused a one-token step while lastHidden is unknown (a short restore).
    const before = previousHidden ?? this.lastHidden!;
    this.lastHidden = hidden;
    return before;
  }

  /** Makes the cache hold `total` positions (the fused layout's buffers grow, copying the cache once; a checkpoint keeps the old ones). */
  fit(total: number): void {
    const grown = this.model.layout.grown(this.past, this.ids.length, total);
    if (grown) this.replaceCache(grown);
  }

  /**
   * Makes room for `positions` in all before a long append (a scheduler feeds a prompt in pieces), so the
   * fused buffers are made once at that size instead of growing, and copying the cache, piece after piece.
   */
  reserve(positions: number): void {
    if (this.disposed) throw new AppError('FAILED_PRECONDITION', 'sequence already disposed');
    this.fit(Math.min(positions, this.model.pack.maxPositions));
  }

  /**
   * Marks the cache as it is now as a point to return to. Nothing is copied: the next `append` keeps the
   * current tensors alive instead of releasing them. At most two are held: the routed position whose step
   * is in flight, and the one of a conditional step sent behind it.
   */
  checkpoint(): void {
    if (this.saved.length >= MAX_CHECKPOINTS) throw new AppError('FAILED_PRECONDITION', `the sequence already holds ${MAX_CHECKPOINTS} checkpoints`);
    this.saved.push({ past: { ...this.past }, length: this.ids.length, lastHidden: this.lastHidden });
  }

  get checkpoints(): number {
    return this.saved.length;
  }

  /** Returns to the oldest checkpoint and drops every one: releases the tensors appended since and the tokens they held. */
  rollback(): void {
    const oldest = this.saved[0];
    if (!oldest) throw new AppError('FAILED_PRECONDITION', 'the sequence has no checkpoint');
    const keep = new Set(Object.values(oldest.past));
    for (const t of new Set([...Object.values(this.past), ...this.saved.slice(1).flatMap((c) => Object.values(c.past))]))
      if (!keep.has(t)) this.model.layout.drop(t);
    this.saved = [];
    this.past = oldest.past;
    this.ids.length = oldest.length;
    this.lastHidden = oldest.lastHidden;
    this.changes++;
  }

  /** Keeps what was appended since the oldest checkpoint and releases its tensors; newer checkpoints stay. */
  commit(): void {
    const oldest = this.saved.shift();
    if (!oldest) return;
    for (const t of Object.values(oldest.past)) if (!this.held(t)) this.model.layout.drop(t);
  }

  /** A copy of the cache for the prefix cache; undefined when disposed, empty, or restored short and not fed since. */
  snapshot(): KvSnapshot | undefined {
    if (this.disposed || this.ids.length === 0 || this.lastHidden === undefined) return undefined;
    const snapshot = takeKvSnapshot(this.past, this.ids, this.lastHidden);
    // A buffer the snapshot shares must outlive this sequence untouched: never back to the pool.
    for (const [name, tensor] of Object.entries(snapshot.kv)) {
      const data = tensor.data as ArrayBufferView;
      if (data.buffer === (this.past[name]!.data as ArrayBufferView).buffer) this.model.kvPool.pin(data);
    }
    return snapshot;
  }

  /**
   * Starts this new, empty sequence from a copy of `snapshot`'s first `length` positions (see
   * restorableLength), with room for `reserve` positions in all (see `reserve`).
   */
  restore(snapshot: KvSnapshot, length: number, reserve = length): void {
    if (this.disposed || this.ids.length > 0) throw new AppError('FAILED_PRECONDITION', 'only a new, empty sequence can start from a snapshot');
    checkRestorable(snapshot, length);
    this.replaceCache(this.model.layout.restored(snapshot, length, reserve));
    this.ids = snapshot.tokens.slice(0, length);
    this.changes++;
    // Short of the whole snapshot the hidden state before the next position is unknown: the next append feeds two or more.
    this.lastHidden = length === snapshot.tokens.length || !this.model.hasHiddenStates ? snapshot.lastHidden : undefined;
  }

  /** Releases the KV cache; the sequence cannot be used afterwards. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.changes++;
    this.model.stats.liveSequences--;
    while (this.saved.length > 0) this.commit();
    this.releasePast();
    this.past = {};
  }

  /** Whether the current cache or a checkpoint still uses `t`. */
  private held(t: OrtTensor): boolean {
    return Object.values(this.past).includes(t) || this.saved.some((c) => Object.values(c.past).includes(t));
  }

  /** Replaces the cache, releasing the tensors of the old one no checkpoint holds. */
  private replaceCache(next: KvCache): void {
    this.releasePast();
    this.past = next;
  }

  /** Releases the current cache tensors, except those a checkpoint still holds. */
  private releasePast(): void {
    for (const t of Object.values(this.past)) if (!this.saved.some((c) => Object.values(c.past).includes(t))) this.model.layout.drop(t);
  }
}
