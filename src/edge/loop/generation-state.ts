/**
 * One generation's state, and the small operations the loop's steps share: the context and its sources,
 * the edge model's sequence and last outputs, the router call, sampling, the text so far, the metrics.
 * The loop (decoder-loop.ts) and speculation (speculation-chains.ts) both work on it.
 */
import { randomUUID } from 'node:crypto';
import type { AppendableSequence, AppendResult } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { sampleToken, type SamplingOptions } from '../../shared/model/sampling.ts';
import { CONSTRAINED_TOP_K, type TokenConstraint } from '../constraint/token-constraint.ts';
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import { BoxRouting } from '../routing/box-routing.ts';
import type { CloudConversation, CloudStepRequest } from '../cloud/cloud-client.ts';
import { CloudDisclosure } from '../cloud/cloud-disclosure.ts';
import { openConversation } from '../privacy/pseudonymised-conversation.ts';
import { Pseudonymiser } from '../privacy/pseudonymiser.ts';
import { promptIdsThatFit, type EdgeEngine, type LoopRequest } from './edge-engine.ts';
import type { DoneEvent, FinishReason, TokenEvent } from './generation-events.ts';
import { MetricsRecorder } from './generation-metrics.ts';
import { ReplayableRandom } from './replayable-random.ts';
import { RoutingCut } from '../routing/routing-cut.ts';
import { StopStringFilter } from './stop-strings.ts';
import type { TokenStreamDecoder } from '../../shared/text/tokenizer.ts';

/** What the loop decided at one position, before its tokens are emitted. */
export interface Decision {
  /** The tokens to emit (a cloud span, or one token). */
  chosen: number[];
  source: TokenEvent['source'];
  score: number | null;
  slmMs: number;
  routerMs: number;
  cloudMs: number;
  cloudError?: string;
}

export function elapsed(since: number): number {
  return performance.now() - since;
}

/**
 * Built once per request: checks the prompt fits the edge model's context and sets everything up.
 *
 * @example
 * const state = new GenerationState(engine, request, signal);
 * await state.startEdge();
 * const { score } = await state.score(state.last!, state.context);
 */
export class GenerationState {
  /** The generation's one id: the runtime's (the page's run, the API's, the logs') and the cloud's `request_id`. */
  readonly requestId: string;
  readonly maxPositions: number;
  readonly eos: Set<number>;
  /** Ids the edge can both feed its model and turn into text: the bound a cloud reply must respect. */
  readonly vocabSize: number;
  readonly context: number[];
  readonly sources: TokenSource[];
  readonly metrics: MetricsRecorder;
  readonly random: ReplayableRandom;
  /** The box's routing state this generation spends from and measures into. */
  readonly routing: BoxRouting;
  /** Where this generation's routing is cut: τ, or what its budgets make of the box's state. */
  readonly cut: RoutingCut;
  /** What this generation sends the cloud, counted as it goes (the `done` event's record of what left). */
  readonly disclosure = new CloudDisclosure();
  /** The generation's private values' translator, when it has any: the cloud then sees only their placeholders. */
  readonly privacy: Pseudonymiser | undefined;
  private readonly textDecoder: TokenStreamDecoder;
  private readonly stopFilter: StopStringFilter;
  text = '';
  conversation: CloudConversation | undefined;
  sequence: AppendableSequence | undefined;
  /** The edge model's outputs at the position being decided. */
  last: AppendResult | undefined;
  /** Edge model time not yet attributed to a token: the forward pass that produced the logits in use. */
  pendingSlmMs = 0;
  /** The request's grammar matcher, when it has a constraint (constraint/): every chosen token passes it. */
  constraint: TokenConstraint | undefined;

  constructor(
    readonly engine: EdgeEngine,
    readonly request: LoopRequest,
    readonly signal: AbortSignal | undefined,
    requestId: string = randomUUID(),
  ) {
    this.requestId = requestId;
    const { edgeModel, tokenizer } = engine;
    const promptIds = promptIdsThatFit(engine, request);
    this.maxPositions = edgeModel.pack.maxPositions;
    this.eos = new Set([...edgeModel.pack.eosTokenIds, ...tokenizer.eosIds]);
    this.vocabSize = Math.min(edgeModel.pack.vocabSize, tokenizer.vocabSize);
    this.context = [...promptIds];
    this.sources = promptIds.map(() => 'prompt');
    this.metrics = new MetricsRecorder(promptIds.length);
    this.random = new ReplayableRandom(request.seed);
    // The box's routing state, or one of this generation's own for an engine without a box (a tool's, a test's).
    this.routing = engine.routing ?? new BoxRouting();
    this.cut = RoutingCut.for(request, this.routing);
    this.textDecoder = tokenizer.createStreamDecoder({ context: promptIds });
    this.stopFilter = new StopStringFilter(request.stop);
    this.privacy = request.privateValues ? new Pseudonymiser(tokenizer, request.privateValues) : undefined;
  }

  /** The generation's cloud conversation, opened at its first routed step or ahead of it (cloud-prefill.ts); with private values, through the pseudonymiser. */
  openConversation(): CloudConversation {
    const cloud = this.engine.cloud;
    if (!cloud) throw new AppError('UNAVAILABLE', 'no cloud is configured');
    const options = {
      requestId: this.requestId,
      routingKey: this.request.conversation,
      signal: this.signal,
      stepTimeoutMs: this.cut.waitMs,
      disclosure: this.disclosure,
    };
    return openConversation(cloud, options, this.privacy);
  }

  /** What the cloud saw of this generation: the text of the context the shim held at the end (placeholders, not values). */
  cloudText(): string {
    const ids = this.disclosure.cloudContext;
    return ids.length === 0 ? '' : this.engine.tokenizer.decode(ids);
  }

  /** Why the generation ends before deciding the next position, if it does. */
  endBeforeStep(): FinishReason | undefined {
    if (this.signal?.aborted) return 'cancelled';
    if (this.metrics.tokens >= this.request.maxNewTokens) return 'length';
    if (this.context.length >= this.maxPositions) return 'context';
    return undefined;
  }

  /** Tokens the generation may still add: the most a routed step may ask for, or decode ahead past it (minus one). */
  get room(): number {
    return Math.min(this.request.maxNewTokens - this.metrics.tokens, this.maxPositions - this.context.length);
  }

  /**
   * Prefill: a new edge sequence fed the context in one forward pass; with a prompt cache, the sequence
   * starts from the longest cached prefix and only the rest is fed. The prompt's cache is then kept at
   * once, so a concurrent request with the same head finds it while this one runs.
   */
  async startEdge(): Promise<void> {
    const { promptCache, edgeModel, scheduler } = this.engine;
    const t = performance.now();
    const measuring = this.cut.waitMs === undefined ? undefined : this.routing.measureFirst(this.engine.cloud);
    const start = promptCache ? promptCache.newSequence(this.context) : { sequence: edgeModel.newSequence(), cachedTokens: 0 };
    this.sequence = scheduler ? scheduler.sequence(start.sequence) : start.sequence;
    this.metrics.cachedTokens = start.cachedTokens;
    await this.feedEdge(this.context.slice(start.cachedTokens));
    promptCache?.keep(this.sequence);
    await measuring;
    this.metrics.prefillMs += elapsed(t);
  }

  /** Appends `ids` to the edge's cache; their forward pass is the next token's edge time. */
  async feedEdge(ids: number[]): Promise<void> {
    const t = performance.now();
    this.last = await this.sequence!.append(ids);
    if (ids.length === 1) this.metrics.decodePass(this.last.batchSize);
    const ms = elapsed(t);
    this.metrics.slmMs += ms;
    this.pendingSlmMs += ms;
  }

  /** Advances the edge's cache past the emitted tokens, unless the generation ends here anyway. */
  async advanceEdge(accepted: number[]): Promise<void> {
    if (this.sequence && this.context.length < this.maxPositions && this.metrics.tokens < this.request.maxNewTokens) await this.feedEdge(accepted);
  }

  /**
   * The one place the router is called, for decided and speculative positions alike; `ids` is the context
   * up to the position (its repetition features read the recent ids).
   */
  async score(result: AppendResult, ids: readonly number[]): Promise<{ score: number; ms: number }> {
    const t = performance.now();
    const score = await this.engine.router.score(result.hidden, result.logits, ids, result.previousHidden);
    return { score, ms: elapsed(t) };
  }

  /**
   * Whether the position being decided routes, recorded in the cut: `llm_only` routes every position, `joint`
   * those below the cut. A position decoded ahead and kept was decided then (`kept`, by the cut's fork, which
   * decides as the cut does), so its decision is taken rather than made again.
   */
  decideRoute(score: number | null, kept: boolean | undefined): boolean {
    if (this.request.mode === 'llm_only') return true;
    if (this.request.mode !== 'joint' || score === null) return false;
    if (this.cut.waitMs !== undefined) this.routing.probeIfDue(this.cut.waitMs, this.engine.cloud);
    const decision = this.cut.decide(score);
    const routed = kept ?? decision.routed;
    this.cut.record(score, routed, decision);
    return routed;
  }

  /** The edge's own token at a position: the request's sampling, drawing from the generation's random stream. */
  pick(result: AppendResult): number {
    return sampleToken(result.logits, this.sampling());
  }

  /** The request's sampling, drawing from the generation's random stream. */
  sampling(): SamplingOptions {
    const { temperature, topP } = this.request;
    return { temperature, topP, random: this.random.next, vocabLimit: this.engine.tokenizer.vocabSize };
  }

  /** The edge's top-1 token at a position: what decoding ahead assumes the cloud will answer. */
  guess(result: AppendResult): number {
    return sampleToken(result.logits, { temperature: 0, topP: 1, random: this.random.next, vocabLimit: this.engine.tokenizer.vocabSize });
  }

  /** A routed step's request: up to `maxTokens` tokens after `context`, whose sources are `sources`. */
  stepRequest(
    context: number[],
    sources: TokenSource[],
    at: { tokenIndex: number; maxTokens: number; score: number | null; hidden?: Float32Array },
  ): CloudStepRequest {
    const { request, signal } = this;
    return {
      context,
      sources,
      tokenIndex: at.tokenIndex,
      maxTokens: at.maxTokens,
      temperature: request.temperature,
      topP: request.topP,
      seed: request.seed,
      stopTokenIds: [...this.eos],
      routerScore: at.score ?? 0,
      threshold: request.threshold,
      hiddenState: this.engine.sendHiddenState ? at.hidden : undefined,
      // A constrained generation takes the cloud's most likely allowed token: it needs the cloud's top-k.
      topLogprobs: this.constraint ? CONSTRAINED_TOP_K : 0,
      room: this.room,
      signal,
    };
  }

  /**
   * Emits the decided tokens one event each, up to an end token or a stop string, and appends them to the
   * context. Returns the tokens emitted and why the generation ends here, if it does.
   */
  *emit(decision: Decision): Generator<TokenEvent, { accepted: number[]; reason?: FinishReason }> {
    const { chosen, source, score, slmMs, routerMs, cloudMs, cloudError } = decision;
    const accepted: number[] = [];
    for (const [i, id] of chosen.entries()) {
      if (this.eos.has(id)) return { accepted, reason: 'eos' };
      accepted.push(id);
      this.context.push(id);
      this.sources.push(source);
      this.metrics.token(source);
      this.routing.spend.emitted(1, source === 'llm' ? 1 : 0);
      // A span's later tokens had no decision of their own; a share budget counts them all the same.
      if (i > 0) this.cut.addTokens(1, source === 'llm');
      const piece = this.stopFilter.push(this.textDecoder.push(id));
      this.text += piece.text;
      yield {
        type: 'token',
        index: this.metrics.tokens - 1,
        id,
        text: piece.text,
        source,
        score: i === 0 ? score : null,
        timings: i === 0 ? { slmMs, routerMs, cloudMs } : { slmMs: 0, routerMs: 0, cloudMs: 0 },
        ...(cloudError ? { cloudError } : {}),
      };
      if (piece.stopped) return { accepted, reason: 'stop' };
    }
    return { accepted };
  }

  /** The final event: the text held back for a possible stop string is released unless one matched. */
  finish(finishReason: FinishReason): DoneEvent {
    this.text += this.stopFilter.push(this.textDecoder.flush()).text;
    this.text += finishReason === 'stop' ? '' : this.stopFilter.flush();
    const metrics = this.metrics.finish(this.cut.report(), this.disclosure.report());
    if (this.constraint) metrics.constraint = { ...this.constraint.counts };
    return {
      type: 'done',
      finishReason,
      text: this.text,
      metrics,
      requestId: this.requestId,
      router: this.engine.router.info.name,
      cloudText: this.cloudText(),
    };
  }

  /** Leaves the edge cache (prompt and output) to the prompt cache, then releases it and the cloud conversation. */
  async release(): Promise<void> {
    if (this.sequence) this.engine.promptCache?.keep(this.sequence);
    this.sequence?.dispose();
    this.constraint?.dispose();
    await this.conversation?.close().catch(() => {});
  }
}
