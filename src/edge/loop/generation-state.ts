/**
 * One generation's state, and the small operations the loop's steps share: the context and its sources,
 * the router call, the routing decision, the step requests, the emitted tokens and text, the metrics. Its
 * edge model side is GenerationEdge (generation-edge.ts: the cache, the outputs being decided, the picks),
 * its cloud side GenerationCloud (generation-cloud.ts: the conversation and what it disclosed). The loop
 * (decoder-loop.ts) and speculation (speculation-chains.ts) work on all three through methods that say what
 * happens; none of their fields is written from outside.
 */
import { randomUUID } from 'node:crypto';
import type { AppendResult } from '../../shared/model/decoder-model.ts';
import { CONSTRAINED_TOP_K, type TokenConstraint } from '../constraint/token-constraint.ts';
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import { BoxRouting } from '../routing/box-routing.ts';
import type { CloudStepRequest } from '../cloud/cloud-client.ts';
import { openConstraint } from '../constraint/generation-constraint.ts';
import { GenerationCloud } from './generation-cloud.ts';
import { sendStep, type CloudReply } from './cloud-reply.ts';
import { promptIdsThatFit, type EdgeEngine, type LoopRequest } from './edge-engine.ts';
import type { DoneEvent, FinishReason, TokenEvent } from './generation-events.ts';
import { MetricsRecorder } from './generation-metrics.ts';
import { elapsed, GenerationEdge } from './generation-edge.ts';
import { RoutingCut } from '../routing/routing-cut.ts';
import { StopStringFilter } from './stop-strings.ts';
import type { TokenStreamDecoder } from '../../shared/text/tokenizer.ts';
import type { TokenLogprob } from './token-logprobs.ts';
import { generationStopIds } from '../../shared/model/stop-ids.ts';

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
  /** Each chosen token's log-probability and alternatives, when the request asked for them. */
  logprobs?: TokenLogprob[];
}

/**
 * Built once per request: checks the prompt fits the edge model's context and sets everything up.
 *
 * @example
 * const state = new GenerationState(engine, request, signal);
 * await state.prefillEdge();
 * const { score } = await state.score(state.last!, state.context);
 */
export class GenerationState {
  /** The generation's one id: the runtime's (the page's run, the API's, the logs') and the cloud's `request_id`. */
  readonly requestId: string;
  readonly maxPositions: number;
  readonly eos: Set<number>;
  /** Ids the edge can both feed its model and turn into text: the bound a cloud reply must respect. */
  readonly vocabSize: number;
  private readonly ids: number[];
  private readonly idSources: TokenSource[];
  readonly metrics: MetricsRecorder;
  /** The box's routing state this generation spends from and measures into. */
  readonly routing: BoxRouting;
  /** Where this generation's routing is cut: τ, or what its budgets make of the box's state. */
  readonly cut: RoutingCut;
  /** The generation's cloud conversation, what it disclosed, and its private values' translator. */
  readonly cloud: GenerationCloud;
  /** The edge model's side: its cache, its outputs at the position being decided, its picks. */
  readonly edge: GenerationEdge;
  private readonly textDecoder: TokenStreamDecoder;
  private readonly stopFilter: StopStringFilter;
  private text = '';
  private grammar: TokenConstraint | undefined;

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
    this.eos = new Set(generationStopIds(edgeModel.pack, tokenizer));
    this.vocabSize = Math.min(edgeModel.pack.vocabSize, tokenizer.vocabSize);
    this.ids = [...promptIds];
    this.idSources = promptIds.map(() => 'prompt');
    this.metrics = new MetricsRecorder(promptIds.length);
    this.edge = new GenerationEdge(engine, request, this.metrics);
    // The box's routing state, or one of this generation's own for an engine without a box (a tool's, a test's).
    this.routing = engine.routing ?? new BoxRouting();
    this.cut = RoutingCut.for(request, this.routing);
    this.textDecoder = tokenizer.createStreamDecoder({ context: promptIds });
    this.stopFilter = new StopStringFilter(request.stop);
    this.cloud = new GenerationCloud(engine, request, signal, this.requestId, this.cut.waitMs);
  }

  /** Every token id of the generation so far: prompt, then emitted tokens. */
  get context(): readonly number[] {
    return this.ids;
  }

  /** The source of each id of `context`: the routing history. */
  get sources(): readonly TokenSource[] {
    return this.idSources;
  }

  /** The request's grammar matcher, when it has a constraint (constraint/): every chosen token passes it. */
  get constraint(): TokenConstraint | undefined {
    return this.grammar;
  }

  /** Opens the request's grammar matcher, when it has a constraint; before the first position is decided. */
  async openConstraint(): Promise<void> {
    this.grammar = await openConstraint(this.engine, this.request);
  }

  /** Sends a routed step on the generation's conversation (opened on first use); its reply comes as a value. */
  sendStep(request: CloudStepRequest): Promise<CloudReply> {
    return sendStep(() => this.cloud.conversation(), request, this.signal);
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
   * Prefill: the edge's cache fed the context (edge.prefill, from the prompt cache where it can), while a
   * wait budget's first round trip is measured.
   */
  async prefillEdge(): Promise<void> {
    const t = performance.now();
    const measuring = this.cut.waitMs === undefined ? undefined : this.routing.measureFirst(this.engine.cloud);
    await this.edge.prefill(this.context);
    await measuring;
    this.metrics.prefillMs += elapsed(t);
  }

  /** Advances the edge's cache past the emitted tokens, unless the generation ends here anyway. */
  async advanceEdge(accepted: number[]): Promise<void> {
    if (this.edge.prefilled && this.context.length < this.maxPositions && this.metrics.tokens < this.request.maxNewTokens) await this.edge.feed(accepted);
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

  /** A routed step's request: up to `maxTokens` tokens after `context`, whose sources are `sources`. */
  stepRequest(
    context: readonly number[],
    sources: readonly TokenSource[],
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
      // So does a request that asks for the alternatives of each token.
      topLogprobs: Math.max(this.grammar ? CONSTRAINED_TOP_K : 0, request.logprobs ?? 0),
      room: this.room,
      signal,
    };
  }

  /**
   * Emits the decided tokens one event each, up to an end token or a stop string, and appends them to the
   * context. Returns the tokens emitted and why the generation ends here, if it does.
   */
  *emit(decision: Decision): Generator<TokenEvent, { accepted: number[]; reason?: FinishReason }> {
    const { chosen, source, score, slmMs, routerMs, cloudMs, cloudError, logprobs } = decision;
    const accepted: number[] = [];
    for (const [i, id] of chosen.entries()) {
      if (this.eos.has(id)) return { accepted, reason: 'eos' };
      accepted.push(id);
      this.ids.push(id);
      this.idSources.push(source);
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
        ...(logprobs ? { logprob: logprobs[i]?.logprob ?? null, topLogprobs: logprobs[i]?.top ?? [] } : {}),
      };
      if (piece.stopped) return { accepted, reason: 'stop' };
    }
    return { accepted };
  }

  /** The final event: the text held back for a possible stop string is released unless one matched. */
  finish(finishReason: FinishReason): DoneEvent {
    this.text += this.stopFilter.push(this.textDecoder.flush()).text;
    this.text += finishReason === 'stop' ? '' : this.stopFilter.flush();
    const metrics = this.metrics.finish(this.cut.report(), this.cloud.disclosure.report());
    if (this.grammar) metrics.constraint = { ...this.grammar.counts };
    return {
      type: 'done',
      finishReason,
      text: this.text,
      metrics,
      requestId: this.requestId,
      router: this.engine.router.info.name,
      cloudText: this.cloud.cloudText(),
    };
  }

  /** Leaves the edge cache (prompt and output) to the prompt cache, then releases it and the cloud conversation. */
  async release(): Promise<void> {
    this.edge.release();
    this.grammar?.dispose();
    await this.cloud.close();
  }
}
