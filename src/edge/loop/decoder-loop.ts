/**
 * The collaborative decoding loop. Each step: the router scores the edge model's last position; in
 * `joint` mode a score below τ asks the cloud for the next token (or a span of them), otherwise the edge
 * model's own token is taken. Either way the chosen tokens are emitted and appended to the edge KV cache
 * with one forward pass, so the prompt is prefilled exactly once. It knows nothing of HTTP or gRPC:
 * callers iterate the events and serialize them.
 *
 * The steps, in order: prepare (GenerationState), send the prompt ahead to the cloud (cloud-prefill.ts: only
 * when --cloud-prefill says so), prefill, then per position: replay a kept position,
 * score it, decide, ask the cloud or pick locally, emit, advance the edge cache; finish. Speculation
 * (decoding ahead while a routed step is on the network) is one object the loop calls at four points
 * (speculation.ts); without it those calls do nothing.
 */
import { AppError, errorMessage, isAbortError } from '../../shared/errors.ts';
import type { CloudLoad } from '../cloud/cloud-client.ts';
import type { LoopRequest, EdgeEngine } from './edge-engine.ts';
import type { GenerationEvent, TokenEvent } from './generation-events.ts';
import { checkCloudReply } from './cloud-reply-check.ts';
import { elapsed, GenerationState, type Decision } from './generation-state.ts';
import { openConstraint } from '../constraint/generation-constraint.ts';
import type { KeptPosition, Speculation } from './speculation/speculation.ts';
import { speculationFor } from './speculation/speculation-chains.ts';
import { rememberTurn, sendPromptAhead } from './cloud-prefill.ts';

export { encodePrompt, promptIdsOf, promptIdsThatFit, type EdgeEngine, type LoopRequest, type SpeculationSettings } from './edge-engine.ts';
export type { DoneEvent, FinishReason, GenerationEvent, TokenEvent } from './generation-events.ts';
export { checkCloudReply } from './cloud-reply-check.ts';

/** What asking the cloud at a routed position gave. */
interface CloudOutcome {
  chosen?: number[];
  source: TokenEvent['source'];
  cloudMs: number;
  cloudError?: string;
  /**
   * The chosen token is already in the edge's cache (speculation kept what it decoded from it); undefined
   * when no speculation settled here.
   */
  fed?: boolean;
  cancelled?: boolean;
}

/** The shim refused a routed step because its backend is saturated: the edge decides the position itself. */
class CloudOverloadedError extends AppError {
  constructor() {
    super('RESOURCE_EXHAUSTED', 'the cloud is overloaded (the shim refused the step at once): the edge decided this token');
  }
}

/** The context ended where a private value may be under way: the edge decides the position (privacy/). */
class PrivateValueWithheld extends AppError {
  constructor() {
    super('FAILED_PRECONDITION', 'a private value may be under way at this position: the edge decided it');
  }
}

/** The router's score at the position being decided: a kept position's was taken while decoding ahead. */
async function scorePosition(state: GenerationState, kept: KeptPosition | undefined): Promise<{ score: number | null; routerMs: number }> {
  const replayed = kept?.step;
  let score: number | null = replayed?.score ?? null;
  let routerMs = replayed?.score !== undefined ? replayed.routerMs : 0;
  if (state.last && replayed?.score === undefined) ({ score, ms: routerMs } = await state.score(state.last, state.context));
  state.metrics.routerMs += routerMs;
  return { score, routerMs };
}

/**
 * Asks the cloud for the routed position (a span of up to `route_span` tokens), decoding ahead meanwhile
 * when speculation does. A cloud failure becomes a `fallback` outcome with its reason; an edge model
 * failure while decoding ahead is rethrown.
 */
async function askCloud(state: GenerationState, speculation: Speculation, score: number | null): Promise<CloudOutcome> {
  const { engine, request, metrics } = state;
  const t = performance.now();
  let chosen: number[] | undefined;
  let source: TokenEvent['source'] = 'slm';
  let cloudError: string | undefined;
  let edgeFailure: { error: unknown } | undefined;
  let load: CloudLoad | undefined;
  let overloaded = false;
  let withheld = false;
  try {
    const conversation = (state.conversation ??= state.openConversation());
    const budget = Math.min(state.cut.maxTokens(request.routeSpan), state.room);
    const stepRequest = state.stepRequest(state.context, state.sources, { tokenIndex: metrics.tokens, maxTokens: budget, score, hidden: state.last?.hidden });
    const { reply } = await speculation.send(conversation, stepRequest);
    // Awaited below unless the edge fails first; a rejection then must not go unhandled.
    reply.catch(() => {});
    await speculation.decodeAhead(reply).catch((error: unknown) => {
      edgeFailure = { error };
      throw error;
    });
    const answer = await reply;
    load = answer.load;
    if (answer.overloaded) throw new CloudOverloadedError();
    if (answer.withheld) throw new PrivateValueWithheld();
    // A private value put back in place of the cloud's placeholder may run past the span (budget ≤ room), never past the room.
    chosen = checkCloudReply(answer, answer.pastSpan ? state.room : budget, state.vocabSize);
    source = 'llm';
    if (state.constraint) {
      // The grammar holds the cloud's tokens too: its allowed prefix, its best allowed alternative, or the edge's own.
      chosen = state.constraint.acceptCloud(chosen, answer.topAlternatives, state.vocabSize);
      if (!chosen) source = 'slm';
    }
  } catch (e) {
    if (edgeFailure) throw edgeFailure.error;
    if (state.signal?.aborted || isAbortError(e)) return { source, cloudMs: 0, cancelled: true };
    // Kept home by the privacy rule: the edge's own token, as if not routed; nothing about the cloud to learn.
    withheld = e instanceof PrivateValueWithheld;
    cloudError = withheld ? undefined : errorMessage(e);
    overloaded = e instanceof CloudOverloadedError;
    source = withheld ? 'slm' : 'fallback';
  }
  const cloudMs = elapsed(t);
  metrics.cloudMs += cloudMs;
  if (!withheld) state.cut.observeStep({ waitMs: cloudMs, overloaded, failed: source === 'fallback' && !overloaded, load });
  const settled = speculation.settle(chosen);
  if (settled?.last) state.last = settled.last;
  return { chosen: settled ? settled.chosen : chosen, source, cloudMs, cloudError, fed: settled?.fed };
}

/** The edge's own token at a position no cloud token was chosen for: a kept position's pick was drawn while decoding ahead. */
async function pickLocally(state: GenerationState, kept: KeptPosition | undefined): Promise<number[]> {
  if (kept?.step.token !== undefined) return [kept.step.token];
  if (!state.sequence) await state.startEdge(); // llm_only with the cloud down: the edge takes over
  if (state.constraint) return [await state.constraint.pick(state.last!.logits, state.sampling())];
  return [state.pick(state.last!)];
}

/** Runs one generation; always ends with a `done` event unless it throws (bad request, edge model failure). */
export async function* generate(engine: EdgeEngine, request: LoopRequest, signal?: AbortSignal, requestId?: string): AsyncGenerator<GenerationEvent> {
  const state = new GenerationState(engine, request, signal, requestId);
  const speculation = speculationFor(state);
  const { metrics } = state;
  try {
    state.constraint = await openConstraint(engine, request);
    if (request.mode !== 'llm_only') {
      // The cloud prefills the prompt while the edge does, when the setting says so (cloud-prefill.ts).
      sendPromptAhead(state);
      await state.startEdge();
    }
    while (true) {
      // The step's edge time includes the grammar's next-token mask, computed here.
      const stepStart = performance.now();
      // A grammar that can take nothing but an end token has ended the output.
      const end = (await state.constraint?.finished()) ? 'eos' : state.endBeforeStep();
      if (end) return yield state.finish(end);
      const kept = speculation.replayKept();
      // A kept position's forward pass and pick were done while waiting: its outputs are the ones decided now.
      if (kept) [state.last, state.pendingSlmMs] = [kept.step.result, kept.step.slmMs];
      const { score, routerMs } = await scorePosition(state, kept);
      const routed = state.decideRoute(score, kept?.step.routed);

      const outcome: CloudOutcome = routed ? await askCloud(state, speculation, score) : { source: 'slm', cloudMs: 0 };
      if (outcome.cancelled) return yield state.finish('cancelled');
      // A kept position's token is in the cache when a later kept position followed it, unless a settled speculation says otherwise.
      const fed = outcome.fed ?? kept?.fed ?? false;
      const chosen = outcome.chosen ?? (await pickLocally(state, kept));

      // Edge time of this step: the forward pass behind these logits, the router and sampling.
      const edgeMs = elapsed(stepStart) - outcome.cloudMs + state.pendingSlmMs + (kept?.replayMs ?? 0);
      const decision: Decision = {
        chosen,
        source: outcome.source,
        score,
        slmMs: state.pendingSlmMs,
        routerMs,
        cloudMs: outcome.cloudMs,
        cloudError: outcome.cloudError,
      };
      state.pendingSlmMs = 0;
      metrics.step(edgeMs, metrics.tokens === 0);

      const { accepted, reason } = yield* state.emit(decision);
      if (reason) return yield state.finish(reason);
      if (!fed) await state.advanceEdge(accepted);
    }
  } finally {
    rememberTurn(state);
    await state.release();
  }
}
