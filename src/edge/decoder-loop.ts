/**
 * The collaborative decoding loop. Each step: the router scores the edge model's last position; in
 * `joint` mode a score below τ asks the cloud for the next token (or a span of them), otherwise the edge
 * model's own token is taken. Either way the chosen tokens are appended to the edge KV cache with one
 * forward pass, so the prompt is prefilled exactly once. It knows nothing of HTTP or gRPC: callers
 * iterate the events and serialize them.
 */
import { randomUUID } from 'node:crypto';
import type { AppendResult, DecoderModel, DecoderSequence } from '../shared/decoder-model.ts';
import { AppError, errorMessage, isAbortError } from '../shared/errors.ts';
import { sampleToken } from '../shared/sampling.ts';
import type { TextTokenizer } from '../shared/tokenizer.ts';
import type { TokenSource } from '../shared/contract-vocabulary.ts';
import type { CloudClient, CloudConversation, CloudStepReply } from './cloud-client.ts';
import { MetricsRecorder, type GenerationMetrics } from './generation-metrics.ts';
import type { GenerationRequest } from './generation-request.ts';
import type { Router } from './router.ts';
import { ReplayableRandom, speculate, type SpeculativeStep } from './speculation.ts';
import { StopStringFilter } from './stop-strings.ts';

export interface EdgeEngine {
  slm: DecoderModel;
  router: Router;
  tokenizer: TextTokenizer;
  /** Absent when the edge runs without a cloud: routed tokens then fall back to the edge model. */
  cloud?: CloudClient;
  /** Send the edge model's hidden state with routed steps (off by default: large and private). */
  sendHiddenState?: boolean;
  /** Most tokens the edge decodes ahead while a routed step is on the network (requests with `speculate`); 16 when omitted. */
  speculationDepth?: number;
  /** What a request that does not say gets for `speculate` (the edge's --speculate setting); off when omitted. */
  speculateByDefault?: boolean;
}

const DEFAULT_SPECULATION_DEPTH = 16;

export interface TokenEvent {
  type: 'token';
  /** 0-based index among generated tokens. */
  index: number;
  id: number;
  /** The text this token adds (may be empty while a multi-byte character or a possible stop string is held back). */
  text: string;
  source: Exclude<TokenSource, 'prompt'>;
  /** Router score at this position; null for tokens the router did not see (llm_only, later tokens of a span). */
  score: number | null;
  timings: { slmMs: number; routerMs: number; cloudMs: number };
  /** Why the cloud could not serve a routed token (source `fallback`). */
  cloudError?: string;
}

export type FinishReason = 'eos' | 'stop' | 'length' | 'context' | 'cancelled';

export interface DoneEvent {
  type: 'done';
  finishReason: FinishReason;
  /** The generated text; exactly the concatenation of the token events' texts. */
  text: string;
  metrics: GenerationMetrics;
  requestId: string;
  router: string;
}

export type GenerationEvent = TokenEvent | DoneEvent;

/**
 * The ids of a cloud reply, checked before the edge uses them: between 1 and `maxTokens` of them, each an
 * integer id of the edge's vocabulary. Throws (and the loop falls back to the edge model) otherwise: a
 * broken or mismatched cloud must cost a routed token, never the generation, whose edge KV cache would
 * refuse the ids.
 */
export function checkCloudReply(reply: CloudStepReply, maxTokens: number, vocabSize: number): number[] {
  const ids: unknown = reply?.tokens;
  if (!Array.isArray(ids) || ids.length === 0) throw new AppError('INTERNAL', 'the cloud returned no tokens');
  if (ids.length > maxTokens) throw new AppError('INTERNAL', `the cloud returned ${ids.length} tokens for a step of at most ${maxTokens}`);
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new AppError('INTERNAL', `the cloud returned token id ${String(id)}, outside the edge vocabulary [0, ${vocabSize})`);
    }
  }
  return ids as number[];
}

/** The prompt's token ids as the loop feeds them: BOS first only when both the pack and its tokenizer have one (Qwen's has none). */
export function encodePrompt(engine: Pick<EdgeEngine, 'slm' | 'tokenizer'>, prompt: string): number[] {
  const addBos = engine.slm.pack.bosTokenId !== undefined && engine.tokenizer.bosId !== undefined;
  return engine.tokenizer.encode(prompt, { addBos, parseSpecialTokens: false });
}

/**
 * A request as the loop runs it. `promptIds`, when the caller has them (a chat prompt its template
 * rendered and encoded with special tokens, or a prompt sent as token ids), are fed as they are instead
 * of encoding `prompt`, which then only describes them.
 */
export type LoopRequest = GenerationRequest & { promptIds?: readonly number[] };

/** The ids a request's generation starts from. */
export function promptIdsOf(engine: Pick<EdgeEngine, 'slm' | 'tokenizer'>, request: LoopRequest): number[] {
  return request.promptIds ? [...request.promptIds] : encodePrompt(engine, request.prompt);
}

function elapsed(since: number): number {
  return performance.now() - since;
}

/** Runs one generation; always ends with a `done` event unless it throws (bad request, edge model failure). */
export async function* generate(
  engine: EdgeEngine,
  request: LoopRequest,
  signal?: AbortSignal,
): AsyncGenerator<GenerationEvent> {
  const { slm, router, tokenizer } = engine;
  const requestId = randomUUID();
  const promptIds = promptIdsOf(engine, request);
  const maxPositions = slm.pack.maxPositions;
  if (promptIds.length >= maxPositions) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `prompt is ${promptIds.length} tokens; the edge model's context window is ${maxPositions} (including generated tokens)`,
    );
  }
  const eos = new Set([...slm.pack.eosTokenIds, ...tokenizer.eosIds]);
  // Ids the edge can both feed its model and turn into text: the bound a cloud reply must respect.
  const vocabSize = Math.min(slm.pack.vocabSize, tokenizer.vocabSize);
  const context = [...promptIds];
  const sources: TokenSource[] = promptIds.map(() => 'prompt');
  const metrics = new MetricsRecorder(promptIds.length);
  const random = new ReplayableRandom(request.seed);
  const textDecoder = tokenizer.createStreamDecoder({ context: promptIds });
  const stopFilter = new StopStringFilter(request.stop);
  let text = '';
  let cloudConversation: CloudConversation | undefined;
  let sequence: DecoderSequence | undefined;
  let last: AppendResult | undefined;
  // Edge model time not yet attributed to a token: the forward pass that produced the logits in use.
  let pendingSlmMs = 0;
  // Positions the edge already decoded speculatively and kept: replayed as this loop's decisions.
  let kept: SpeculativeStep[] = [];
  const speculationDepth = engine.speculationDepth ?? DEFAULT_SPECULATION_DEPTH;
  const vocabLimit = tokenizer.vocabSize;
  const pick = (result: AppendResult) =>
    sampleToken(result.logits, { temperature: request.temperature, topP: request.topP, random: random.next, vocabLimit });
  // The one place the router is called, for decided and speculative positions alike; `ids` is the context
  // up to the position (its repetition features read the recent ids).
  const scorePosition = async (result: AppendResult, ids: readonly number[]) => {
    const t = performance.now();
    const score = await router.score(result.hidden, result.logits, ids);
    return { score, ms: elapsed(t) };
  };
  const routes = (score: number | null) => request.mode === 'joint' && score !== null && score < request.threshold;

  const feedEdge = async (ids: number[]) => {
    const t = performance.now();
    last = await sequence!.append(ids);
    const ms = elapsed(t);
    metrics.slmMs += ms;
    pendingSlmMs += ms;
  };
  const startEdge = async () => {
    sequence = slm.newSequence();
    const t = performance.now();
    await feedEdge(context);
    metrics.prefillMs += elapsed(t);
  };
  const finish = (finishReason: FinishReason): DoneEvent => {
    text += stopFilter.push(textDecoder.flush()).text;
    const tail = finishReason === 'stop' ? '' : stopFilter.flush();
    text += tail;
    return { type: 'done', finishReason, text, metrics: metrics.finish(), requestId, router: router.info.name };
  };

  interface Speculation {
    guess: number;
    from: AppendResult;
    draws: number;
    steps: SpeculativeStep[];
  }
  /** Decodes ahead from the edge's top-1 guess until `step` settles (or the bound); the cache can return here. */
  const speculateDuring = async (step: Promise<unknown>, ahead: number): Promise<Speculation> => {
    let replied = false;
    // Handled here so a failure during speculation is not an unhandled rejection; the loop awaits `step` itself.
    step.then(
      () => (replied = true),
      () => (replied = true),
    );
    const from = last!;
    const guess = sampleToken(from.logits, { temperature: 0, topP: 1, random: random.next, vocabLimit });
    const draws = random.draws;
    sequence!.checkpoint();
    // The context as the speculative positions see it: the decided tokens, then the guess and the picks.
    const speculativeIds = [...context];
    const steps = await speculate(guess, ahead, {
      feed: async (token) => {
        const t = performance.now();
        const result = await sequence!.append([token]);
        speculativeIds.push(token);
        return { result, ms: elapsed(t) };
      },
      score: (result) => scorePosition(result, speculativeIds),
      routes,
      pick,
      isEos: (token) => eos.has(token),
      replied: () => replied,
    });
    return { guess, from, draws, steps };
  };
  /**
   * Keeps the speculative steps when the step's tokens are exactly the guess; otherwise returns the cache to
   * the routed position and rewinds the random stream. True when the chosen token is already in the cache.
   */
  const resolveSpeculation = (speculation: Speculation, chosen: number[] | undefined): boolean => {
    const { steps } = speculation;
    if (steps.length > 0) metrics.speculated++;
    if (steps.length > 0 && chosen?.length === 1 && chosen[0] === speculation.guess) {
      metrics.speculationHits++;
      sequence!.commit();
      kept = steps;
      return true;
    }
    sequence!.rollback();
    random.rewind(speculation.draws);
    metrics.wastedSteps += steps.length;
    for (const step of steps) metrics.wastedMs += step.slmMs + step.routerMs + step.pickMs;
    last = speculation.from;
    return false;
  };

  try {
    if (request.mode !== 'llm_only') await startEdge();
    while (true) {
      if (signal?.aborted) return yield finish('cancelled');
      if (metrics.tokens >= request.maxNewTokens) return yield finish('length');
      if (context.length >= maxPositions) return yield finish('context');
      const stepStart = performance.now();
      // A kept speculative position: its forward pass, router score and pick were done while waiting.
      const replay = kept.shift();
      let replayMs = 0;
      if (replay) {
        last = replay.result;
        pendingSlmMs = replay.slmMs;
        replayMs = replay.routerMs + replay.pickMs;
        metrics.savedMs += replay.slmMs + replayMs;
        metrics.slmMs += replay.slmMs;
      }

      let score: number | null = replay?.score ?? null;
      let routerMs = replay?.score !== undefined ? replay.routerMs : 0;
      if (last && replay?.score === undefined) ({ score, ms: routerMs } = await scorePosition(last, context));
      metrics.routerMs += routerMs;
      const route = request.mode === 'llm_only' || routes(score);

      let chosen: number[] | undefined;
      let source: TokenEvent['source'] = 'slm';
      let cloudError: string | undefined;
      let cloudMs = 0;
      // Set when the chosen token is already in the edge's cache (fed speculatively).
      let fed = replay !== undefined && kept.length > 0;
      if (route) {
        const t = performance.now();
        let speculation: Speculation | undefined;
        // The edge model failing while speculating is an edge failure, not the cloud's: it is rethrown.
        let edgeFailure: { error: unknown } | undefined;
        try {
          if (!engine.cloud) throw new AppError('UNAVAILABLE', 'no cloud is configured');
          cloudConversation ??= engine.cloud.openConversation({ requestId, signal });
          const budget = Math.min(request.routeSpan, request.maxNewTokens - metrics.tokens, maxPositions - context.length);
          const step = cloudConversation.next({
            context,
            sources,
            tokenIndex: metrics.tokens,
            maxTokens: budget,
            temperature: request.temperature,
            topP: request.topP,
            seed: request.seed,
            stopTokenIds: [...eos],
            routerScore: score ?? 0,
            threshold: request.threshold,
            hiddenState: engine.sendHiddenState && last ? last.hidden : undefined,
            topLogprobs: 0,
            signal,
          });
          // Exactness needs the cache the loop without speculation builds: a span is fed there as one forward
          // pass, whose logits may differ in the last bits from feeding its tokens one by one, so only
          // single-token steps are speculated past.
          const ahead = Math.min(speculationDepth, request.maxNewTokens - metrics.tokens - 1, maxPositions - context.length - 1);
          const speculating =
            request.speculate && request.mode === 'joint' && request.routeSpan === 1 && ahead > 0 && engine.cloud.state() !== 'circuit-open';
          if (speculating) {
            speculation = await speculateDuring(step, ahead).catch((error: unknown) => {
              edgeFailure = { error };
              throw error;
            });
          }
          const reply: CloudStepReply = await step;
          chosen = checkCloudReply(reply, budget, vocabSize);
          source = 'llm';
        } catch (e) {
          if (edgeFailure) throw edgeFailure.error;
          if (signal?.aborted || isAbortError(e)) return yield finish('cancelled');
          cloudError = errorMessage(e);
          source = 'fallback';
        }
        cloudMs = elapsed(t);
        metrics.cloudMs += cloudMs;
        if (speculation) {
          // A failed step falls back to the edge's own pick: with greedy decoding that is the guess itself.
          if (!chosen && request.temperature === 0) chosen = [speculation.guess];
          fed = resolveSpeculation(speculation, chosen);
        }
      }
      // The edge's pick at a kept position was drawn while speculating, in the same order as here.
      if (!chosen && replay?.token !== undefined) chosen = [replay.token];
      if (!chosen) {
        if (!sequence) await startEdge(); // llm_only with the cloud down: the edge takes over
        chosen = [pick(last!)];
      }

      // Edge time of this step: the forward pass behind these logits, the router and sampling.
      const edgeMs = elapsed(stepStart) - cloudMs + pendingSlmMs + replayMs;
      const slmMs = pendingSlmMs;
      pendingSlmMs = 0;
      metrics.step(edgeMs, metrics.tokens === 0);

      const accepted: number[] = [];
      let reason: FinishReason | undefined;
      for (const [i, id] of chosen.entries()) {
        if (eos.has(id)) {
          reason = 'eos';
          break;
        }
        accepted.push(id);
        context.push(id);
        sources.push(source);
        metrics.token(source);
        const piece = stopFilter.push(textDecoder.push(id));
        text += piece.text;
        yield {
          type: 'token',
          index: metrics.tokens - 1,
          id,
          text: piece.text,
          source,
          score: i === 0 ? score : null,
          timings: i === 0 ? { slmMs, routerMs, cloudMs } : { slmMs: 0, routerMs: 0, cloudMs: 0 },
          ...(cloudError ? { cloudError } : {}),
        };
        if (piece.stopped) {
          reason = 'stop';
          break;
        }
      }
      if (reason) return yield finish(reason);
      if (!fed && sequence && context.length < maxPositions && metrics.tokens < request.maxNewTokens) await feedEdge(accepted);
    }
  } finally {
    sequence?.dispose();
    await cloudConversation?.close().catch(() => {});
  }
}
