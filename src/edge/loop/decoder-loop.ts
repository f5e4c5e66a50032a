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
import type { LoopRequest, EdgeEngine } from './edge-engine.ts';
import type { GenerationEvent } from './generation-events.ts';
import { askCloud, type CloudOutcome } from './ask-cloud.ts';
import { elapsed } from './generation-edge.ts';
import { GenerationState, type Decision } from './generation-state.ts';
import type { KeptPosition } from './speculation/speculation.ts';
import { speculationFor } from './speculation/speculation-chains.ts';
import { rememberTurn, sendDecidedAhead, sendPromptAhead } from './cloud-prefill.ts';
import { edgeLogprob, type TokenLogprob } from './token-logprobs.ts';

export { encodePrompt, promptIdsOf, promptIdsThatFit, type EdgeEngine, type LoopRequest, type SpeculationSettings } from './edge-engine.ts';
export type { DoneEvent, FinishReason, GenerationEvent, TokenEvent } from './generation-events.ts';
export { checkCloudReply } from './cloud-reply-check.ts';

/** The router's score at the position being decided: a kept position's was taken while decoding ahead. */
async function scorePosition(state: GenerationState, kept: KeptPosition | undefined): Promise<{ score: number | null; routerMs: number }> {
  const replayed = kept?.step;
  const last = state.edge.last;
  let score: number | null = replayed?.score ?? null;
  let routerMs = replayed?.score !== undefined ? replayed.routerMs : 0;
  if (last && replayed?.score === undefined) ({ score, ms: routerMs } = await state.score(last, state.context));
  state.metrics.routerMs += routerMs;
  return { score, routerMs };
}

/**
 * The edge's own token at a position no cloud token was chosen for: a kept position's pick was drawn while
 * decoding ahead. With its figures when the request asked for log-probabilities.
 */
async function pickLocally(state: GenerationState, kept: KeptPosition | undefined): Promise<{ chosen: number[]; logprobs?: TokenLogprob[] }> {
  if (!state.edge.prefilled) await state.prefillEdge(); // llm_only with the cloud down: the edge takes over
  const { edge, constraint, request } = state;
  // Taken before the pick, which moves the grammar on: what it allows here.
  const allowed = request.logprobs !== undefined && constraint ? await constraint.allowedNow() : undefined;
  let id: number;
  if (kept?.step.token !== undefined) id = kept.step.token;
  else if (constraint) id = await constraint.pick(edge.last!.logits, edge.sampling());
  else id = edge.pick(edge.last!);
  if (request.logprobs === undefined) return { chosen: [id] };
  return { chosen: [id], logprobs: [edgeLogprob(edge.last!.logits, id, request.logprobs, state.vocabSize, allowed)] };
}

/** Runs one generation; always ends with a `done` event unless it throws (bad request, edge model failure). */
export async function* generate(engine: EdgeEngine, request: LoopRequest, signal?: AbortSignal, requestId?: string): AsyncGenerator<GenerationEvent> {
  const state = new GenerationState(engine, request, signal, requestId);
  const speculation = speculationFor(state);
  const { metrics } = state;
  try {
    await state.openConstraint();
    if (request.mode !== 'llm_only') {
      // The cloud prefills the prompt while the edge does, when the setting says so (cloud-prefill.ts).
      sendPromptAhead(state);
      await state.prefillEdge();
    }
    while (true) {
      // The step's edge time includes the grammar's next-token mask, computed here.
      const stepStart = performance.now();
      // A grammar that can take nothing but an end token has ended the output.
      const end = (await state.constraint?.finished()) ? 'eos' : state.endBeforeStep();
      if (end) return yield state.finish(end);
      // A kept position's forward pass and pick were done while waiting: replaying makes it the one decided now.
      const kept = speculation.replayKept();
      const { score, routerMs } = await scorePosition(state, kept);
      const routed = state.decideRoute(score, kept?.step.routed);

      const outcome: CloudOutcome = routed ? await askCloud(state, speculation, score) : { source: 'slm', cloudMs: 0 };
      if (outcome.cancelled) return yield state.finish('cancelled');
      // A kept position's token is in the cache when a later kept position followed it, unless a settled speculation says otherwise.
      const fed = outcome.fed ?? kept?.fed ?? false;
      const { chosen, logprobs } = outcome.chosen ? { chosen: outcome.chosen, logprobs: outcome.logprobs } : await pickLocally(state, kept);

      // Edge time of this step: the forward pass behind these logits, the router and sampling.
      const slmMs = state.edge.takeSlmMs();
      const edgeMs = elapsed(stepStart) - outcome.cloudMs + slmMs + (kept?.replayMs ?? 0);
      const decision: Decision = { chosen, source: outcome.source, score, slmMs, routerMs, cloudMs: outcome.cloudMs, cloudError: outcome.cloudError, logprobs };
      metrics.step(edgeMs, metrics.tokens === 0);

      const { accepted, reason } = yield* state.emit(decision);
      if (reason) return yield state.finish(reason);
      // Before the edge's pass over them: the shim computes them meanwhile (cloud-prefill.ts).
      sendDecidedAhead(state);
      if (!fed) await state.advanceEdge(accepted);
    }
  } finally {
    rememberTurn(state);
    await state.release();
  }
}
