/**
 * The default backend: a decoder model pack run in process with onnxruntime. Each session keeps its own
 * DecoderSequence (KV cache), so a routed step costs one forward pass over only the tokens the cache has
 * not seen (the edge's delta plus the token this backend returned last time), whatever the context
 * length. At most `maxLiveSequences` caches stay alive; the least recently used idle one is dropped
 * beyond that and rebuilt from the session's context (one prefill) when its session steps again.
 *
 * With `prefixCacheBytes`, a session's cache outlives it in a prefix cache (src/shared/model/prefix-cache.ts,
 * the edge's): a cache dropped or closed is kept there, and a new (or rebuilt) one starts from the longest
 * kept prefix of its context, so a new generation whose context starts like an earlier one (a chat's next
 * turn, a shared system prompt) prefills only the rest. `cachedTokens` reports what was reused.
 *
 * @example
 * const backend = await EmbeddedBackend.load({ modelPack: 'models/stories260k', maxLiveSequences: 32 });
 * const session = backend.openSequence('s1');
 * const { ids } = await session.step({ context: [1], maxTokens: 1, sampling, requestId: 's1-0', signal });
 */
import { randomInt } from 'node:crypto';
import { basename } from 'node:path';
import { DecoderModel, type AppendableSequence, type DecoderLoadOptions } from '../../shared/model/decoder-model.ts';
import { PrefixCache } from '../../shared/model/prefix-cache.ts';
import { DecodeScheduler } from '../../shared/model/scheduler/decode-scheduler.ts';
import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/process/logger.ts';
import { logSoftmax, logSumExp, topK } from '../../shared/model/logits.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { sampleToken } from '../../shared/model/sampling.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { abortReason } from '../../shared/grpc/stream.ts';
import type { SpanFinish, TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import { scoreOnModel } from '../../shared/model/position-scores.ts';
import { checkRoomToGenerate } from './context-window.ts';
import type {
  Backend,
  BackendInfo,
  BackendPrefillRequest,
  BackendPrefillResult,
  BackendScoreRequest,
  BackendScoreResult,
  BackendSequence,
  BackendStepRequest,
  BackendStepResult,
} from './backend.ts';

export interface EmbeddedBackendOptions {
  modelPack: string;
  /** The pack's ONNX file to run; `model.onnx` when omitted. */
  modelFile?: string;
  /** onnxruntime threads per forward pass; 0 = onnxruntime's choice. */
  threads?: number;
  /** Most sessions whose steps share one forward pass (the backend's scheduler, decode-scheduler.ts); 1 or omitted runs each alone. */
  maxBatch?: number;
  /** Most context tokens of a step that shares a pass with others (SchedulerOptions.appendTokens, plain layout); 1 when omitted. */
  appendTokens?: number;
  /** onnxruntime execution providers in order of preference; `['cpu']` when omitted. */
  executionProviders?: readonly string[];
  /** Where the forward passes run (DecoderLoadOptions.thread); the main thread when omitted. */
  thread?: DecoderLoadOptions['thread'];
  /** Where a provider fallback is reported. */
  log?: Logger;
  maxLiveSequences: number;
  /**
   * Ids the tokenizer knows; sampling never picks one at or above it. Exports pad the embedding beyond
   * the tokenizer (Qwen: 151,936 rows, 151,669 tokens), and a padding row names no token.
   */
  tokenVocabSize?: number;
  /** Bytes of ended sessions' caches kept for new sessions (see the header); 0 or omitted = none. */
  prefixCacheBytes?: number;
}

/** Counters for tests and benchmarks. */
export interface EmbeddedStats {
  /** Caches dropped to stay within maxLiveSequences. */
  evictions: number;
  /** Caches rebuilt from a session's context after an eviction. */
  rebuilds: number;
}

export class EmbeddedBackend implements Backend {
  readonly info: BackendInfo;
  readonly stats: EmbeddedStats = { evictions: 0, rebuilds: 0 };
  /** Sessions holding a live KV cache, least recently used first. */
  private readonly live = new Set<EmbeddedSequence>();
  /** Ended sessions' caches, for new sessions starting alike; absent when off. */
  readonly prefixCache: PrefixCache | undefined;

  private constructor(
    readonly model: DecoderModel,
    private readonly maxLive: number,
    /** @internal */ readonly tokenVocabSize: number | undefined,
    prefixCacheBytes: number | undefined,
    /** Runs the sessions' appends in shared passes; absent: each runs alone. */
    readonly scheduler?: DecodeScheduler,
  ) {
    const { pack } = model;
    this.prefixCache = prefixCacheBytes ? new PrefixCache(model, { maxBytes: prefixCacheBytes }) : undefined;
    this.info = { name: `embedded:${basename(pack.dir)}`, vocabSize: pack.vocabSize, maxContext: pack.maxPositions };
  }

  static async load(options: EmbeddedBackendOptions): Promise<EmbeddedBackend> {
    const { threads, executionProviders, thread, log, maxBatch, appendTokens } = options;
    const pack = loadModelPack(options.modelPack, options.modelFile);
    const model = await DecoderModel.load(pack, { threads: threads || undefined, executionProviders, thread, log });
    try {
      const scheduler = maxBatch ? DecodeScheduler.over(model, { maxBatch, appendTokens }, log) : undefined;
      return new EmbeddedBackend(model, options.maxLiveSequences, options.tokenVocabSize, options.prefixCacheBytes, scheduler);
    } catch (e) {
      await model.release();
      throw e;
    }
  }

  /**
   * A backend over a model that is already loaded (the evaluation's in-process cloud shares one with its
   * caller). `close` still releases the model.
   */
  static over(
    model: DecoderModel,
    options: Omit<EmbeddedBackendOptions, 'modelPack' | 'threads' | 'executionProviders' | 'thread' | 'log' | 'maxBatch' | 'appendTokens'>,
  ): EmbeddedBackend {
    return new EmbeddedBackend(model, options.maxLiveSequences, options.tokenVocabSize, options.prefixCacheBytes);
  }

  /**
   * Forward passes over the sequence a chunk at a time on a cache of its own, which is dropped after; each
   * pass waits for its turn, so a routed step waits at most for one chunk's pass, never for a whole window.
   */
  async score(request: BackendScoreRequest): Promise<BackendScoreResult> {
    const started = performance.now();
    request.signal.throwIfAborted();
    const { candidates, topK, vocabLimit, signal } = request;
    const turn = async () => {
      signal.throwIfAborted();
      return request.turn();
    };
    const positions = await scoreOnModel(this.model, request.ids, { candidates, topK, vocabLimit }, turn);
    if (request.signal.aborted) throw abortReason(request.signal);
    return { positions, exact: true, backendMs: performance.now() - started };
  }

  openSequence(): BackendSequence {
    return new EmbeddedSequence(this);
  }

  async close(): Promise<void> {
    for (const session of [...this.live]) session.dispose();
    this.prefixCache?.clear();
    await this.model.release();
  }

  /** @internal marks `session` most recently used, evicting the oldest idle cache beyond the cap. */
  use(session: EmbeddedSequence): void {
    this.live.delete(session);
    this.live.add(session);
    if (this.live.size <= this.maxLive) return;
    for (const candidate of this.live) {
      if (candidate === session || candidate.busy) continue;
      candidate.evict();
      this.stats.evictions++;
      return;
    }
  }

  /** @internal */
  forget(session: EmbeddedSequence): void {
    this.live.delete(session);
  }
}

class EmbeddedSequence implements BackendSequence {
  busy = false;
  private sequence: AppendableSequence | undefined;
  /** Logits after the last token in the cache (reused when a step brings no new token). */
  private logits: Float32Array | undefined;
  private random: (() => number) | undefined;
  private seed: number | undefined;
  private everBuilt = false;

  constructor(private readonly backend: EmbeddedBackend) {}

  async step(request: BackendStepRequest): Promise<BackendStepResult> {
    const start = performance.now();
    const { context, sampling, signal } = request;
    const { vocabSize, maxPositions } = this.backend.model.pack;
    if (context.length === 0) throw new AppError('INVALID_ARGUMENT', 'the context is empty: open the session with at least one token');
    checkRoomToGenerate(context.length, maxPositions);
    this.busy = true;
    try {
      const sequence = this.acquire(context);
      const cachedTokens = sequence.length;
      if (sequence.length < context.length) this.logits = (await sequence.append(context.slice(sequence.length))).logits;

      const ids: number[] = [];
      const logprobs: number[] = [];
      const top: TokenAlternative[][] = [];
      let finish: SpanFinish = 'length';
      while (true) {
        if (signal.aborted) throw abortReason(signal);
        const logits = this.logits!;
        const id = sampleToken(logits, {
          temperature: sampling.temperature,
          topP: sampling.topP,
          random: this.sampler(sampling.seed),
          vocabLimit: this.backend.tokenVocabSize,
        });
        ids.push(id);
        if (sampling.topLogprobs > 0) {
          const all = logSoftmax(logits);
          logprobs.push(all[id]!);
          top.push(topK(all, Math.min(sampling.topLogprobs, vocabSize)).map(({ id: alt, value }) => ({ id: alt, logprob: value })));
        } else {
          logprobs.push(logits[id]! - logSumExp(logits));
          top.push([]);
        }
        if (sampling.stopTokenIds.includes(id)) {
          finish = 'stop';
          break;
        }
        if (context.length + ids.length >= maxPositions) {
          finish = 'context';
          break;
        }
        if (ids.length >= request.maxTokens) break;
        // Within a span each new token needs one decode step; the span's last token waits for the next step.
        this.logits = (await sequence.append([id])).logits;
      }
      return { ids, logprobs, top, cachedTokens, backendMs: performance.now() - start, finish };
    } catch (e) {
      // The cache may now hold tokens the session's context will never have: start over next time.
      this.evict({ keep: false });
      throw e;
    } finally {
      this.busy = false;
    }
  }

  /** Appends what the cache lacks of the context; the first step then samples from the logits it leaves. */
  async prefill(request: BackendPrefillRequest): Promise<BackendPrefillResult> {
    const start = performance.now();
    const { context, signal } = request;
    if (context.length === 0) throw new AppError('INVALID_ARGUMENT', 'the context is empty: open the session with at least one token');
    checkRoomToGenerate(context.length, this.backend.model.pack.maxPositions);
    this.busy = true;
    try {
      const sequence = this.acquire(context);
      const cachedTokens = sequence.length;
      if (signal.aborted) throw abortReason(signal);
      if (sequence.length < context.length) this.logits = (await sequence.append(context.slice(sequence.length))).logits;
      return { cachedTokens, prefilledTokens: context.length - cachedTokens, backendMs: performance.now() - start };
    } catch (e) {
      this.evict({ keep: false });
      throw e;
    } finally {
      this.busy = false;
    }
  }

  /** The session's cache, rebuilt empty after an eviction; it always holds a prefix of `context`. */
  private acquire(context: readonly number[]): AppendableSequence {
    if (this.sequence && !isPrefix(this.sequence.tokens, context)) this.evict();
    if (!this.sequence) {
      const { prefixCache, model, scheduler } = this.backend;
      const sequence = prefixCache ? prefixCache.newSequence(context).sequence : model.newSequence();
      this.sequence = scheduler ? scheduler.sequence(sequence) : sequence;
      this.logits = undefined;
      if (this.everBuilt) this.backend.stats.rebuilds++;
      this.everBuilt = true;
    }
    this.backend.use(this);
    return this.sequence;
  }

  private sampler(seed: number | undefined): () => number {
    if (!this.random || seed !== this.seed) {
      this.seed = seed;
      this.random = seededRandom(seed ?? randomInt(0, 2 ** 32));
    }
    return this.random;
  }

  /**
   * Drops the KV cache, leaving it to the prefix cache unless `keep` is false (a failed step); the next
   * step starts again from the context (and the longest prefix kept).
   */
  evict(options: { keep: boolean } = { keep: true }): void {
    if (this.sequence && options.keep) this.backend.prefixCache?.keep(this.sequence);
    this.sequence?.dispose();
    this.sequence = undefined;
    this.logits = undefined;
    this.backend.forget(this);
  }

  dispose(): void {
    this.evict();
  }
}

function isPrefix(prefix: readonly number[], of: readonly number[]): boolean {
  if (prefix.length > of.length) return false;
  // The context only ever grows, so checking the last cached token catches a mismatched session cheaply.
  return prefix.length === 0 || prefix[prefix.length - 1] === of[prefix.length - 1];
}
