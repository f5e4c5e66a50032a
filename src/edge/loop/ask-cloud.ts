/**
 * A routed position's step: asks the cloud for up to `route_span` tokens (decoding ahead meanwhile when
 * speculation does), and turns its reply, a CloudReply value, into what the loop emits there. Every kind of
 * reply is handled in one `switch`; no exception carries a reply.
 *
 * @example
 * const outcome = await askCloud(state, speculation, score);
 * if (outcome.cancelled) return yield state.finish('cancelled');
 */
import type { CloudLoad } from '../cloud/cloud-client.ts';
import { checkCloudReply } from './cloud-reply-check.ts';
import { unhandledReply, type CloudReply } from './cloud-reply.ts';
import type { TokenEvent } from './generation-events.ts';
import type { GenerationState } from './generation-state.ts';
import type { Speculation } from './speculation/speculation.ts';
import { cloudLogprobs, type TokenLogprob } from './token-logprobs.ts';

/** What asking the cloud at a routed position gave. */
export interface CloudOutcome {
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
  /** The cloud's figures for `chosen`, when the request asked for log-probabilities and the cloud chose them. */
  logprobs?: TokenLogprob[];
}

/** What a reply gives the position, and what the routing cut learns from it (nothing, for a step never sent). */
interface TakenReply {
  chosen?: number[];
  source: TokenEvent['source'];
  cloudError?: string;
  observed?: { overloaded: boolean; failed: boolean; load?: CloudLoad };
  cancelled?: boolean;
}

const NO_CLOUD: CloudReply = { kind: 'failed', reason: 'no cloud is configured' };
const OVERLOADED = 'the cloud is overloaded (the shim refused the step at once): the edge decided this token';

/**
 * Asks the cloud for the routed position. A reply without usable tokens becomes a `fallback` outcome with its
 * reason (the edge picks the token); an edge model failure while decoding ahead is rethrown.
 */
export async function askCloud(state: GenerationState, speculation: Speculation, score: number | null): Promise<CloudOutcome> {
  const { request, metrics } = state;
  const t = performance.now();
  const budget = Math.min(state.cut.maxTokens(request.routeSpan), state.room);
  const stepRequest = state.stepRequest(state.context, state.sources, {
    tokenIndex: metrics.tokens,
    maxTokens: budget,
    score,
    hidden: state.edge.last?.hidden,
  });
  // Without a cloud there is nothing to send, nor to decode ahead of.
  let reply = NO_CLOUD;
  let repliedAt = t;
  if (state.cloud.available) {
    const sent = await speculation.send(stepRequest, (r) => state.sendStep(r));
    // Rejects only when the edge model fails while decoding ahead: that ends the generation.
    const ahead = speculation.decodeAhead(sent.reply);
    reply = await replyWhileDecodingAhead(sent.reply, ahead);
    repliedAt = performance.now();
    // The speculative pass still running is edge work, kept when the guess was right: settling needs it.
    await ahead;
  }
  // Read before the grammar takes the tokens in: the alternatives it allows at each of them.
  const allowed =
    request.logprobs !== undefined && reply.kind === 'served' && state.constraint
      ? await state.constraint.allowedAlternatives(reply.tokens, reply.topAlternatives, state.vocabSize)
      : undefined;
  const taken = takeReply(state, reply, budget);
  if (taken.cancelled) return { source: taken.source, cloudMs: 0, cancelled: true };
  const cloudMs = repliedAt - t;
  metrics.cloudMs += cloudMs;
  if (taken.observed) state.cut.observeStep({ waitMs: cloudMs, ...taken.observed });
  const settled = state.cloud.available ? speculation.settle(taken.chosen) : undefined;
  const chosen = settled ? settled.chosen : taken.chosen;
  const logprobs =
    request.logprobs !== undefined && chosen && taken.source === 'llm' && reply.kind === 'served'
      ? cloudLogprobs(chosen, reply, request.logprobs, state.vocabSize, allowed)
      : undefined;
  return { chosen, source: taken.source, cloudMs, cloudError: taken.cloudError, fed: settled?.fed, ...(logprobs ? { logprobs } : {}) };
}

/**
 * The reply as soon as it is read, while decoding ahead may still be in a pass; a failure of decoding ahead
 * (the edge model's) first. With the model on a worker thread (--model-thread) a reply is read during a
 * pass, so the routed token's wait ends then, not when the pass does.
 */
export function replyWhileDecodingAhead(reply: Promise<CloudReply>, ahead: Promise<void>): Promise<CloudReply> {
  return Promise.race([reply, ahead.then(() => reply)]);
}

function takeReply(state: GenerationState, reply: CloudReply, budget: number): TakenReply {
  switch (reply.kind) {
    case 'served': {
      // A private value put back in place of the cloud's placeholder may run past the span (budget ≤ room), never past the room.
      const checked = checkCloudReply(reply.tokens, reply.pastSpan ? state.room : budget, state.vocabSize);
      if ('problem' in checked) return fallback(checked.problem, reply.load);
      const observed = { overloaded: false, failed: false, load: reply.load };
      if (!state.constraint) return { chosen: checked.ids, source: 'llm', observed };
      // The grammar holds the cloud's tokens too: its allowed prefix, its best allowed alternative, or the edge's own.
      const chosen = state.constraint.acceptCloud(checked.ids, reply.topAlternatives, state.vocabSize);
      return { chosen, source: chosen ? 'llm' : 'slm', observed };
    }
    case 'withheld':
      // Kept home by the privacy rule: the edge's own token, as if not routed; nothing about the cloud to learn.
      return { source: 'slm' };
    case 'overloaded':
      // Not a cloud failure: the shim answered at once that it would have waited too long.
      return { source: 'fallback', cloudError: OVERLOADED, observed: { overloaded: true, failed: false, load: reply.load } };
    case 'skipped':
      // Only a conditional step is ever skipped, and speculation sends it again: one here is the cloud's mistake.
      return fallback('the cloud skipped a step that assumed nothing', reply.load);
    case 'failed':
      return fallback(reply.reason, reply.load);
    case 'cancelled':
      return { source: 'slm', cancelled: true };
    default:
      return unhandledReply(reply);
  }
}

/** The edge decides a routed position the cloud did not: its own token, marked `fallback`, with the reason. */
function fallback(reason: string, load: CloudLoad | undefined): TakenReply {
  return { source: 'fallback', cloudError: reason, observed: { overloaded: false, failed: true, load } };
}
