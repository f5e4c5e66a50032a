/**
 * A decoder model pack run with onnxruntime-node. `DecoderModel` owns the ONNX session (one per pack)
 * and runs one forward pass at a time; its KV layout (kv-layout.ts) is one object, plain or fused, chosen
 * by what the export declares. Each generation gets a `DecoderSequence` (decoder-sequence.ts), which owns
 * its KV cache. Passes shared by several sequences are a scheduler's (scheduler/decode-scheduler.ts).
 *
 * @example
 * const model = await DecoderModel.load(loadModelPack('models/stories260k'));
 * const seq = model.newSequence();
 * const { logits, hidden } = await seq.append([1]);
 * seq.dispose(); await model.release();
 */
import type { DecoderIo } from './decoder-io.ts';
import { openDecoderSession } from './decoder-session.ts';
import { DecoderSequence } from './decoder-sequence.ts';
import type { DecoderLoadOptions, DecoderStats } from './decoder-types.ts';
import type { ModelPack } from './model-pack.ts';
import type { ModelSession, ModelThread } from './model-session.ts';
import type { OrtTensor } from './ort.ts';
import { KvBufferPool } from './kv-buffer-pool.ts';
import { FusedLayout } from './kv-fused-layout.ts';
import type { Fetches, KvLayout, LaidOutModel } from './kv-layout.ts';
import { PlainLayout } from './kv-plain-layout.ts';
import { prefaultedBuffer } from './prefaulted-buffers.ts';
import { runSession } from './run-session.ts';

export { DecoderSequence } from './decoder-sequence.ts';
export type { AppendableSequence, AppendResult, DecoderLoadOptions, DecoderStats } from './decoder-types.ts';

/**
 * Released KV buffers kept for reuse (kv-buffer-pool.ts): about one long sequence's cache at the
 * Qwen2.5-0.5B shape (25 MB at 1,024 positions in float32) and two more of a few hundred positions; or a
 * plain-layout batched pass of four rows at about 300 positions (kv-plain-layout.ts, plainPassPoolBytes).
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

export class DecoderModel implements LaidOutModel {
  readonly stats: DecoderStats = { runs: 0, tokensFed: 0, liveSequences: 0, kvBytesCopied: 0, outputBytes: 0, runMs: 0 };
  /** Released KV buffers: the fused layout's, and the plain layout's batched passes'. */
  readonly kvPool: KvBufferPool;
  /** How the export holds its KV cache: fed back as `present.*` (plain) or in buffers written in place (fused). */
  readonly layout: KvLayout;
  readonly hasHiddenStates: boolean;
  /** The last axis of the KV cache: the config's head_dim, or the padded head size of a fused graph. */
  readonly cacheHeadDim: number;
  /** Bytes of one position of the whole KV cache (every `past_key_values.*` tensor) in float32. */
  readonly kvBytesPerPosition: number;

  private constructor(
    readonly pack: ModelPack,
    private readonly session: ModelSession,
    /** Element types and optional inputs, as the export declares them. */
    readonly io: DecoderIo,
    /** The execution providers the session runs on, in order of preference (after any fallback). */
    readonly executionProviders: readonly string[],
    /** Where the forward passes run (decoder-session.ts: a worker was asked for, but the export writes in place). */
    readonly thread: ModelThread,
    kvPoolBytes: number | undefined,
  ) {
    this.hasHiddenStates = io.hidden !== undefined;
    this.cacheHeadDim = io.cacheHeadDim ?? pack.headDim;
    this.kvBytesPerPosition = io.pastNames.length * pack.numKvHeads * this.cacheHeadDim * Float32Array.BYTES_PER_ELEMENT;
    this.kvPool = new KvBufferPool(kvPoolBytes ?? poolBytesFor(pack, this.kvBytesPerPosition), prefaultedBuffer);
    this.layout = io.layout === 'fused' ? new FusedLayout(this) : new PlainLayout(this);
  }

  static async load(pack: ModelPack, options: DecoderLoadOptions = {}): Promise<DecoderModel> {
    const { session, io, executionProviders, thread } = await openDecoderSession(pack, options);
    try {
      return new DecoderModel(pack, session, io, executionProviders, thread, options.kvPoolBytes);
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

  /** One forward pass of `tokens` positions in all (a sequence's, or a batch's); `fetches` as in runSession. */
  async forward(feeds: Record<string, OrtTensor>, tokens: number, fetches?: Fetches): Promise<Record<string, OrtTensor>> {
    this.stats.runs++;
    this.stats.tokensFed += tokens;
    // onnxruntime-node runs a session inside a setImmediate callback, after the runs already queued. Immediates
    // fire in order, so one queued right before it marks when this run starts; its wait is not its cost. (On a
    // worker thread the run starts when the worker reads it, about then too: passes run one at a time.)
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
