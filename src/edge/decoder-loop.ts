/**
 * The collaborative decoding loop. Each step: the router scores the edge model's last position; in
 * `joint` mode a score below τ asks the cloud for the next token (or a span of them), otherwise the edge
 * model's own token is taken. Either way the chosen tokens are appended to the edge KV cache with one
 * forward pass, so the prompt is prefilled exactly once. It knows nothing of HTTP or gRPC: callers
 * iterate the events and serialize them.
 *
 * With `speculate`, the edge decodes past a routed position from its own guess while the step is out
 * (speculation.ts); a position of that chain that routes too is sent at once as a conditional step, which
 * assumes the guess, and the edge decodes on past it as well. The first reply then settles both: a wrong
 * guess throws the whole chain away (the conditional step comes back skipped); a right one keeps the chain,
 * and the loop takes the conditional step already in flight when it reaches that position. A conditional
 * step that failed or came back skipped there is sent again as a plain step, so the cloud is asked at every
 * routed position exactly as without speculation.
 */
import { randomUUID } from 'node:crypto';
import type { AppendResult, DecoderModel, DecoderSequence } from '../shared/decoder-model.ts';
import { AppError, errorMessage, isAbortError } from '../shared/errors.ts';
import { sampleToken } from '../shared/sampling.ts';
import type { TextTokenizer } from '../shared/tokenizer.ts';
import type { TokenSource } from '../shared/contract-vocabulary.ts';
import type { CloudClient, CloudConversation, CloudStepReply, CloudStepRequest } from './cloud-client.ts';
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
  /**
   * While speculating, send the step of a second routed position at once as a conditional step (it assumes
   * the first step returns the guess) instead of waiting for the first reply; on when omitted.
   */
  conditionalSteps?: boolean;
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
  // The speculation of the conditional step sent at the last kept position: that position's step is in flight.
  let pending: Speculation | undefined;
  // A conditional step whose assumption failed: its (skipped) reply must be in before the next step is sent.
  let drain: Promise<void> | undefined;
  const speculationDepth = engine.speculationDepth ?? DEFAULT_SPECULATION_DEPTH;
  const vocabLimit = tokenizer.vocabSize;
  const pick = (result: AppendResult) =>
    sampleToken(result.logits, { temperature: request.temperature, topP: request.topP, random: random.next, vocabLimit });
  // The one place the router is called, for decided and speculative positions alike; `ids` is the context
  // up to the position (its repetition features read the recent ids).
  const scorePosition = async (result: AppendResult, ids: readonly number[]) => {
    const t = performance.now();
    const score = await router.score(result.hidden, result.logits, ids, result.previousHidden);
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

  /**
   * A routed position whose step is in flight, and what the edge decoded past it from its guess. When a
   * position of that chain routed too, its conditional step went out at once: `behind` holds it, with the
   * chain's part after it. Each speculation holds one checkpoint of the edge's cache, at its routed position.
   */
  interface Speculation {
    step: Promise<CloudStepReply>;
    /** Token index of the routed position. */
    tokenIndex: number;
    guess: number;
    from: AppendResult;
    draws: number;
    steps: SpeculativeStep[];
    /** The context up to the end of the chain (shared with the speculation behind, which continues it). */
    ids: number[];
    /** The sources of `ids` as the steps sent from inside the chain give them: its routed positions' tokens as `llm`. */
    idSources: TokenSource[];
    behind?: { index: number; speculation: Speculation };
    replied: boolean;
  }
  /** Starts decoding ahead from the edge's top-1 guess at the routed position whose step is `step`; the cache can return here. */
  const openSpeculation = (step: Promise<CloudStepReply>, from: AppendResult, tokenIndex: number, ids: number[], idSources: TokenSource[]): Speculation => {
    const guess = sampleToken(from.logits, { temperature: 0, topP: 1, random: random.next, vocabLimit });
    const speculation: Speculation = { step, tokenIndex, guess, from, draws: random.draws, steps: [], ids, idSources, replied: false };
    // Handled here so a failure during speculation is not an unhandled rejection; the loop awaits `step` itself.
    step.then(
      () => (speculation.replied = true),
      () => (speculation.replied = true),
    );
    sequence!.checkpoint();
    return speculation;
  };
  /**
   * Sends the step of a routed position inside `speculation`'s chain (the last of its steps) as a conditional
   * step, and returns the guess to decode on from; undefined when it may not (or the guess ends the text).
   */
  const branch = (speculation: Speculation, at: SpeculativeStep): number | undefined => {
    if (engine.conditionalSteps === false || speculation.behind || speculation.replied || !cloudConversation) return undefined;
    if (engine.cloud?.state() === 'circuit-open') return undefined;
    const index = speculation.steps.length - 1;
    const tokenIndex = speculation.tokenIndex + 1 + index;
    const step = cloudConversation.next({
      context: [...speculation.ids],
      sources: [...speculation.idSources],
      tokenIndex,
      maxTokens: 1,
      temperature: request.temperature,
      topP: request.topP,
      seed: request.seed,
      stopTokenIds: [...eos],
      routerScore: at.score ?? 0,
      threshold: request.threshold,
      hiddenState: engine.sendHiddenState ? at.result.hidden : undefined,
      topLogprobs: 0,
      conditional: true,
      signal,
    });
    metrics.conditionalSteps++;
    const behind = openSpeculation(step, at.result, tokenIndex, speculation.ids, speculation.idSources);
    speculation.behind = { index, speculation: behind };
    return eos.has(behind.guess) ? undefined : behind.guess;
  };
  /** Decodes ahead at the end of `speculation`'s chain until its step settles (or the bound). */
  const speculateDuring = async (speculation: Speculation, ahead: number): Promise<void> => {
    const tail = speculation.steps.at(-1);
    let token: number | undefined;
    if (!tail) token = speculation.guess;
    else if (tail.token !== undefined) token = eos.has(tail.token) ? undefined : tail.token;
    // The chain ended at a routed position while another step was in flight: its step can go out now.
    else if (tail.score !== undefined && routes(tail.score)) token = branch(speculation, tail);
    if (token === undefined || speculation.replied) return;
    // The next token fed is a guess for a routed position (source `llm` in the context a conditional step
    // sends, as it will be if the guess holds) rather than the edge's pick.
    let guessing = !tail || tail.token === undefined;
    await speculate(
      token,
      ahead,
      {
        feed: async (token) => {
          const t = performance.now();
          const result = await sequence!.append([token]);
          speculation.ids.push(token);
          speculation.idSources.push(guessing ? 'llm' : 'slm');
          guessing = false;
          return { result, ms: elapsed(t) };
        },
        score: (result) => scorePosition(result, speculation.ids),
        routes,
        pick,
        isEos: (token) => eos.has(token),
        replied: () => speculation.replied,
        branch: (step) => {
          const guess = branch(speculation, step);
          guessing = guess !== undefined;
          return guess;
        },
      },
      speculation.steps,
    );
  };
  /**
   * Keeps the speculative steps when the step's tokens are exactly the guess; otherwise returns the cache to
   * the routed position and rewinds the random stream. True when the chosen token is already in the cache.
   * A kept chain with a conditional step behind it is kept up to that step's position, where the loop takes
   * the step in flight (`pending`) instead of sending one.
   */
  const resolveSpeculation = (speculation: Speculation, chosen: number[] | undefined): boolean => {
    const { steps, behind } = speculation;
    if (steps.length > 0) metrics.speculated++;
    if (steps.length > 0 && chosen?.length === 1 && chosen[0] === speculation.guess) {
      metrics.speculationHits++;
      sequence!.commit();
      kept = behind ? steps.slice(0, behind.index + 1) : steps;
      if (behind) {
        behind.speculation.steps = steps.slice(behind.index + 1);
        pending = behind.speculation;
      }
      return true;
    }
    sequence!.rollback();
    random.rewind(speculation.draws);
    metrics.wastedSteps += steps.length;
    for (const step of steps) metrics.wastedMs += step.slmMs + step.routerMs + step.pickMs;
    if (behind) {
      // Its assumed token was wrong: the cloud skips it. Its reply comes before any later step's.
      metrics.conditionalSkipped++;
      drain = behind.speculation.step.then(
        () => {},
        () => {},
      );
    }
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
          const conversation = (cloudConversation ??= engine.cloud.openConversation({ requestId, signal }));
          const budget = Math.min(request.routeSpan, request.maxNewTokens - metrics.tokens, maxPositions - context.length);
          const stepRequest: CloudStepRequest = {
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
          };
          const resumed = pending;
          pending = undefined;
          let step: Promise<CloudStepReply>;
          if (resumed) {
            // This position's conditional step went out while the previous one was in flight. Skipped or failed
            // (its predecessor failed, and the stream with it), it is sent again now as a plain step, once every
            // step sent behind it is answered: the cloud is asked here exactly as without speculation.
            const resend = async () => {
              await resumed.behind?.speculation.step.catch(() => {});
              return conversation.next(stepRequest);
            };
            step = resumed.step.then(
              (reply) => (reply.skipped ? resend() : reply),
              (e: unknown) => {
                if (signal?.aborted || isAbortError(e)) throw e;
                return resend();
              },
            );
          } else {
            if (drain) await drain;
            drain = undefined;
            step = conversation.next(stepRequest);
          }
          // Awaited below unless the edge fails first; a rejection then must not go unhandled.
          step.catch(() => {});
          // Exactness needs the cache the loop without speculation builds: a span is fed there as one forward
          // pass, whose logits may differ in the last bits from feeding its tokens one by one, so only
          // single-token steps are speculated past.
          const ahead = Math.min(speculationDepth, request.maxNewTokens - metrics.tokens - 1, maxPositions - context.length - 1);
          const speculating =
            request.speculate && request.mode === 'joint' && request.routeSpan === 1 && ahead > 0 && engine.cloud.state() !== 'circuit-open';
          speculation = resumed;
          if (speculating) {
            speculation ??= openSpeculation(step, last!, metrics.tokens, [...context], [...sources]);
            await speculateDuring(speculation, ahead).catch((error: unknown) => {
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
