/**
 * A decoder model pack run with onnxruntime-node. `DecoderModel` owns the ONNX session (one per pack);
 * each generation gets a `DecoderSequence`, which owns its KV cache and grows it by exactly the tokens
 * appended, so nothing is ever re-prefilled.
 *
 * @example
 * const model = await DecoderModel.load(loadModelPack('models/stories260k'));
 * const seq = model.newSequence();
 * const { logits, hidden } = await seq.append([1]);
 * seq.dispose(); await model.release();
 */
import { type DecoderIo, newKeyValuesName, readDecoderIo } from './decoder-io.ts';
import { AppError } from './errors.ts';
import { createSessionOn } from './execution-providers.ts';
import { emptyTensor, feedable, float32Rows, indexTensor, logitRows, toFloat32 } from './float-tensors.ts';
import type { ModelPack } from './model-pack.ts';
import { ort, type InferenceSession, type OrtTensor } from './ort.ts';
import { growKvBuffers, kvCapacity, newPositionFetches, sharedFetches, writeNewPositions } from './kv-buffer.ts';
import { KvBufferPool } from './kv-buffer-pool.ts';
import { prefaultedBuffer } from './prefaulted-buffers.ts';
import { restoredKv, takeKvSnapshot, type KvSnapshot } from './kv-snapshot.ts';
import { runSession } from './run-session.ts';
import { checkAppend } from './append-checks.ts';
import { DecodeBatcher } from './decode-batcher.ts';
import type { AppendResult, DecoderLoadOptions, DecoderStats } from './decoder-types.ts';

export type { AppendResult, DecoderLoadOptions, DecoderStats } from './decoder-types.ts';

/**
 * Released KV buffers kept for reuse (kv-buffer-pool.ts): about one long sequence's cache at the
 * Qwen2.5-0.5B shape (25 MB at 1,024 positions in float32) and two more of a few hundred positions; or a
 * plain-layout batched pass of four rows at about 300 positions (batched-step.ts, plainPassPoolBytes).
 * A small model gets less (poolBytesFor): what a pass of eight rows at its full context uses.
 */
export const DEFAULT_KV_POOL_BYTES = 64 * 2 ** 20;

/**
 * The pool's default bound for a model: DEFAULT_KV_POOL_BYTES, or 16 full-context caches where that is
 * less (a plain-layout pass of eight rows gathers eight and splits out eight), so that the demo's 260K-
 * parameter models hold a few megabytes of released buffers, not 64.
 */
function poolBytesFor(pack: ModelPack, kvBytesPerPosition: number): number {
  return Math.min(DEFAULT_KV_POOL_BYTES, 16 * pack.maxPositions * kvBytesPerPosition);
}

export class DecoderModel {
  readonly stats: DecoderStats = { runs: 0, tokensFed: 0, liveSequences: 0, kvBytesCopied: 0, outputBytes: 0, runMs: 0 };
  /** @internal released KV buffers: the fused layout's, and the plain layout's batched passes'. */
  readonly kvPool: KvBufferPool;
  readonly hasHiddenStates: boolean;
  /** The last axis of the KV cache: the config's head_dim, or the padded head size of a fused graph. */
  readonly cacheHeadDim: number;
  /** Bytes of one position of the whole KV cache (every `past_key_values.*` tensor) in float32. */
  readonly kvBytesPerPosition: number;
  /** Present when loaded with `batching` and the export can take a batch (see DecodeBatcher.refusal). */
  batcher?: DecodeBatcher;

  private constructor(
    readonly pack: ModelPack,
    private readonly session: InferenceSession,
    /** Element types and optional inputs, as the export declares them. */
    readonly io: DecoderIo,
    /** The execution providers the session runs on, in order of preference (after any fallback). */
    readonly executionProviders: readonly string[],
    kvPoolBytes: number | undefined,
  ) {
    this.hasHiddenStates = io.hidden !== undefined;
    this.cacheHeadDim = io.cacheHeadDim ?? pack.headDim;
    this.kvBytesPerPosition = io.pastNames.length * pack.numKvHeads * this.cacheHeadDim * Float32Array.BYTES_PER_ELEMENT;
    this.kvPool = new KvBufferPool(kvPoolBytes ?? poolBytesFor(pack, this.kvBytesPerPosition), prefaultedBuffer);
  }

  static async load(pack: ModelPack, options: DecoderLoadOptions = {}): Promise<DecoderModel> {
    const sessionOptions = {
      graphOptimizationLevel: 'all',
      ...(options.threads ? { intraOpNumThreads: options.threads, interOpNumThreads: 1 } : {}),
      ...(options.profileFilePrefix ? { enableProfiling: true, profileFilePrefix: options.profileFilePrefix } : {}),
    } as const;
    const { session, executionProviders } = await createSessionOn(pack.modelPath, sessionOptions, options.executionProviders ?? ['cpu'], options.log);
    try {
      const io = readDecoderIo({ where: pack.modelPath, numLayers: pack.numLayers, inputs: session.inputMetadata, outputs: session.outputMetadata });
      const model = new DecoderModel(pack, session, io, executionProviders, options.kvPoolBytes);
      if (options.batching) model.batcher = DecodeBatcher.over(model, options.batching, options.log);
      return model;
    } catch (e) {
      await session.release();
      throw e;
    }
  }

  newSequence(): DecoderSequence {
    this.stats.liveSequences++;
    return new DecoderSequence(this);
  }

  async release(): Promise<void> {
    await this.session.release();
  }

  /** Writes the profile of the runs so far (only when loaded with `profileFilePrefix`). */
  endProfiling(): void {
    this.session.endProfiling();
  }

  /** @internal one forward pass; used by DecoderSequence. `fetches` as in runSession. */
  async forward(feeds: Record<string, OrtTensor>, tokens: number, fetches?: Record<string, OrtTensor | null>): Promise<Record<string, OrtTensor>> {
    this.stats.runs++;
    this.stats.tokensFed += tokens;
    // onnxruntime-node runs a session inside a setImmediate callback, after the runs already queued. Immediates
    // fire in order, so one queued right before it marks when this run starts; its wait is not its cost.
    let start = performance.now();
    setImmediate(() => {
      start = performance.now();
    });
    const out = await runSession(this.session, feeds, fetches);
    this.stats.runMs += performance.now() - start;
    for (const t of Object.values(out)) this.stats.outputBytes += (t.data as ArrayBufferView).byteLength;
    return out;
  }
}

const MAX_CHECKPOINTS = 2;

export class DecoderSequence {
  private past: Record<string, OrtTensor>;
  private ids: number[] = [];
  private disposed = false;
  /** The cache as it was at each `checkpoint()`, oldest first: the same tensors, kept alive until `rollback` or `commit`. */
  private saved: { past: Record<string, OrtTensor>; length: number; lastHidden: Float32Array | undefined }[] = [];
  /** `hidden_states` of the cache's last position (zeros while empty; undefined after a short restore): the next append's `previousHidden`. */
  private lastHidden: Float32Array | undefined;
  /** Changes counted: appends, rollbacks, restores, disposal (see `revision`). */
  private changes = 0;

  constructor(private readonly model: DecoderModel) {
    const { numKvHeads } = model.pack;
    const headDim = model.cacheHeadDim;
    this.past = {};
    // The cache stays in the export's own type: present.* outputs are fed back as they come. The fused
    // layout's buffers are made on the first append, at the capacity it needs.
    if (model.io.layout === 'plain') for (const name of model.io.pastNames) this.past[name] = emptyTensor(model.io.cache, [1, numKvHeads, 0, headDim]);
    this.lastHidden = new Float32Array(model.hasHiddenStates ? model.pack.hiddenSize : 0);
  }

  /** Whether `dispose` was called: a batched pass then leaves the sequence alone (it may be disposed while the pass runs). */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Tokens in the KV cache. */
  get length(): number {
    return this.ids.length;
  }

  /** The token ids the cache holds, oldest first. */
  get tokens(): readonly number[] {
    return this.ids;
  }

  /**
   * @internal a count that moves whenever the cache's positions may change (an append, a rollback, a
   * restore, disposal): kept batch buffers (kept-batch.ts) are fed again only while it has not moved.
   */
  get revision(): number {
    return this.changes;
  }

  /**
   * Feeds `tokens` as one forward pass (a prefill when the cache is empty, a decode step for one
   * token) and returns the outputs of the last position.
   */
  async append(tokens: readonly number[], options: { allPositions?: boolean } = {}): Promise<AppendResult> {
    if (this.disposed) throw new AppError('FAILED_PRECONDITION', 'sequence already disposed');
    checkAppend(this.model.pack, this.ids.length, tokens);
    if (tokens.length === 1 && this.lastHidden === undefined) throw new AppError('FAILED_PRECONDITION', 'a sequence restored short of its snapshot needs two or more tokens on its first append');
    const { batcher } = this.model;
    return batcher && !options.allPositions ? batcher.append(this, tokens) : this.appendAlone(tokens, options);
  }

  /** @internal `append` as one forward pass of this sequence alone; the batcher runs prefill pieces through it. */
  async appendAlone(tokens: readonly number[], options: { allPositions?: boolean } = {}): Promise<AppendResult> {
    if (this.disposed) throw new AppError('FAILED_PRECONDITION', 'sequence already disposed');
    const { hiddenSize, vocabSize } = this.model.pack;
    const total = this.ids.length + tokens.length;
    const n = tokens.length;
    const start = this.ids.length;
    const { io } = this.model;
    const fused = io.layout === 'fused';
    if (fused) this.fitBuffers(total);
    const feeds: Record<string, OrtTensor> = { ...this.past, input_ids: indexTensor(io.ids, tokens, [1, n]) };
    if (io.mask) feeds.attention_mask = indexTensor(io.mask, { length: total }, [1, total], () => 1);
    if (io.positions) feeds.position_ids = indexTensor(io.positions, { length: n }, [1, n], (i) => start + i);
    // The last two positions: where hidden_states is the LM head's input (models expose-hidden) it is cut alike, and previousHidden needs the row before the last.
    if (io.logitsToKeep) feeds.num_logits_to_keep = new ort.Tensor('int64', BigInt64Array.of(options.allPositions ? 0n : BigInt(Math.min(n, 2))), []);
    if (fused) {
      feeds.seqlens_k = new ort.Tensor('int32', Int32Array.of(total - 1), [1]);
      feeds.total_sequence_length = new ort.Tensor('int32', Int32Array.of(total), []);
    }
    // The fused layout fetches only the new positions and writes them into its buffers (kv-buffer.ts),
    // or, with an older graph, fetches the buffers themselves as present.*, written in place.
    const fetches = fused ? (io.newKeyValues ? newPositionFetches(io.pastNames, this.model.hasHiddenStates) : sharedFetches(this.past, this.model.hasHiddenStates)) : undefined;
    const out = await this.model.forward(feeds, n, fetches);
    if (fused && io.newKeyValues) {
      for (const name of io.pastNames) writeNewPositions(this.past[name]!, out[newKeyValuesName(name)]!, 0, start);
    } else if (!fused) {
      this.releasePast();
      for (const name of Object.keys(this.past)) this.past[name] = feedable(out[name.replace('past_key_values', 'present')]!);
    }
    this.ids.push(...tokens);
    this.changes++;

    // float16 outputs are converted here, once, and only the rows asked for (a prefill's last position).
    // hidden_states holds every fed position, or the last two when it is the sliced LM head input.
    const hiddenRows = out.hidden_states?.dims[1] ?? 0;
    const hidden = out.hidden_states ? float32Rows(out.hidden_states, (hiddenRows - 1) * hiddenSize, hiddenRows * hiddenSize) : new Float32Array(0);
    const previousHidden = out.hidden_states && n >= 2 ? float32Rows(out.hidden_states, (hiddenRows - 2) * hiddenSize, (hiddenRows - 1) * hiddenSize) : this.lastHidden!;
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
    if (fused && io.newKeyValues) for (const name of io.pastNames) out[newKeyValuesName(name)]!.dispose();
    return result;
  }

  /** @internal the cache tensors a batched step reads (the fused layout's buffers, written in place). */
  get cache(): Readonly<Record<string, OrtTensor>> {
    return this.past;
  }

  /**
   * @internal records a batched pass's tokens: `present` is the plain layout's new cache (fused: written
   * in place); `previousHidden` the row before the last when the pass fed two or more tokens and has
   * hidden_states. Returns the append's previousHidden.
   */
  acceptAppend(tokens: readonly number[], present: Record<string, OrtTensor> | undefined, hidden: Float32Array, previousHidden?: Float32Array): Float32Array {
    if (present) {
      this.releasePast();
      this.past = present;
    }
    this.ids.push(...tokens);
    this.changes++;
    // append() refused a one-token step while lastHidden is unknown (a short restore).
    const before = previousHidden ?? this.lastHidden!;
    this.lastHidden = hidden;
    return before;
  }

  /**
   * Marks the cache as it is now as a point to return to. Nothing is copied: the next `append` keeps the
   * current tensors alive instead of releasing them. At most two are held: the routed position whose step
   * is in flight, and the one of a conditional step sent behind it.
   *
   * @example
   * seq.checkpoint(); await seq.append([guess]); seq.rollback(); // the cache holds what it held before
   */
  checkpoint(): void {
    if (this.saved.length >= MAX_CHECKPOINTS) throw new AppError('FAILED_PRECONDITION', `the sequence already holds ${MAX_CHECKPOINTS} checkpoints`);
    this.saved.push({ past: { ...this.past }, length: this.ids.length, lastHidden: this.lastHidden });
  }

  /** How many checkpoints are held. */
  get checkpoints(): number {
    return this.saved.length;
  }

  /** Returns to the oldest checkpoint and drops every one: releases the tensors appended since and the tokens they held. */
  rollback(): void {
    const oldest = this.saved[0];
    if (!oldest) throw new AppError('FAILED_PRECONDITION', 'the sequence has no checkpoint');
    const keep = new Set(Object.values(oldest.past));
    for (const t of new Set([...Object.values(this.past), ...this.saved.slice(1).flatMap((c) => Object.values(c.past))])) if (!keep.has(t)) this.drop(t);
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
    for (const t of Object.values(oldest.past)) if (!this.held(t)) this.drop(t);
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
    this.releasePast();
    this.past = restoredKv(snapshot, length, this.model.io, this.model.pack, this.model.cacheHeadDim, this.allocate, reserve);
    this.ids = snapshot.tokens.slice(0, length);
    this.changes++;
    // Short of the whole snapshot the hidden state before the next position is unknown: the next append feeds two or more.
    this.lastHidden = length === snapshot.tokens.length || !this.model.hasHiddenStates ? snapshot.lastHidden : undefined;
  }

  /**
   * Makes room for `positions` in all before a long append (the batcher feeds a prompt in pieces), so
   * the fused buffers are made once at that size instead of growing, and copying the cache, piece after
   * piece. The plain layout has nothing to reserve.
   */
  reserve(positions: number): void {
    if (this.disposed) throw new AppError('FAILED_PRECONDITION', 'sequence already disposed');
    if (this.model.io.layout === 'fused') this.fitBuffers(Math.min(positions, this.model.pack.maxPositions));
  }

  /**
   * Makes the fused layout's buffers hold `total` positions: made on the first append, grown (copying the
   * cache once) when outgrown. A checkpoint keeps the old buffers, whose first positions are
   * still valid, so a rollback across a growth stays correct. @internal also called by a batched step.
   */
  fitBuffers(total: number): void {
    const { pack, io } = this.model;
    const current = this.past[io.pastNames[0]!]?.dims[2] ?? 0;
    if (total <= current) return;
    const headDim = this.model.cacheHeadDim;
    const grown = growKvBuffers(this.past, io.pastNames, pack.numKvHeads, headDim, kvCapacity(total, current, pack.maxPositions), this.ids.length, this.allocate);
    this.model.stats.kvBytesCopied += this.ids.length * this.model.kvBytesPerPosition;
    this.releasePast();
    this.past = grown;
  }

  private readonly allocate = (elements: number): Float32Array => this.model.kvPool.take(elements);

  /**
   * Releases a cache tensor nothing holds any more: a fused buffer goes back to the model's pool, and so
   * does the pool's buffer under a plain-layout cache a batched pass wrote (batched-step.ts); onnxruntime's
   * own outputs go to the garbage collector.
   */
  private drop(t: OrtTensor): void {
    if (this.model.io.layout === 'fused') {
      if (t.data instanceof Float32Array) this.model.kvPool.release(t.data);
    } else if (ArrayBuffer.isView(t.data)) {
      this.model.kvPool.releaseBufferOf(t.data);
    }
    t.dispose();
  }

  /** Whether the current cache or a checkpoint still uses `t`. */
  private held(t: OrtTensor): boolean {
    return Object.values(this.past).includes(t) || this.saved.some((c) => Object.values(c.past).includes(t));
  }

  /** Releases the current cache tensors, except those a checkpoint still holds. */
  private releasePast(): void {
    for (const t of Object.values(this.past)) if (!this.saved.some((c) => Object.values(c.past).includes(t))) this.drop(t);
  }

  /** Releases the KV cache; the sequence cannot be used afterwards. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.changes++;
    this.model.stats.liveSequences--;
    this.model.batcher?.forget(this);
    while (this.saved.length > 0) this.commit();
    this.releasePast();
    this.past = {};
  }
}
