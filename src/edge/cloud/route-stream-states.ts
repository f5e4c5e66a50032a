/**
 * The edge's side of one generation's Route streams as a state machine, pure (no streams, no timers): where
 * the stream is, and how many steps are in flight on it. Every change of either goes through
 * `routeStreamTransition`; GrpcCloudConversation does the I/O around it.
 *
 * Phases: `no-stream` (the next step opens one with the whole context), `opening` (`open` and the first step
 * are on their way, or `open` alone, sent ahead of the first step to have the cloud prefill), `open` (the shim answered a step on it), `draining` (close half-closed it, or waits to),
 * `ended` (closed: no more steps). Steps in flight: 0, 1, or 2 when a conditional step joined the step in
 * flight on its stream. A step that is refused says why with a status code, as a Refusal.
 *
 * @example
 * let state = INITIAL_ROUTE_STREAM_STATE;             // { phase: 'no-stream', inFlight: 0 }
 * state = enterRouteStreamState(state, 'step');        // { phase: 'no-stream', inFlight: 1 }
 * state = enterRouteStreamState(state, 'open');        // { phase: 'opening', inFlight: 1 }
 * routeStreamTransition(state, 'step');                // { refused: 'FAILED_PRECONDITION', message: 'a step of ... in flight ...' }
 */
import { AppError } from '../../shared/errors.ts';

export type RouteStreamPhase = 'no-stream' | 'opening' | 'open' | 'draining' | 'ended';

export interface RouteStreamState {
  readonly phase: RouteStreamPhase;
  /** Steps started and not yet settled: a step, and at most one conditional step behind it. */
  readonly inFlight: 0 | 1 | 2;
}

/**
 * `step`: a step starts with nothing in flight. `pipeline`: a conditional step starts behind the step in
 * flight, on its stream. `open`: the step in flight opens a new stream (first try or resend). `answer`: a
 * step's result arrived. `drop`: the stream broke, ended, disagrees with the edge, or the generation was
 * cancelled. `settle`: a step's reply or failure is handed back. `close` / `closed`: close begins / ends.
 */
export type RouteStreamEvent = 'step' | 'pipeline' | 'open' | 'ahead' | 'answer' | 'drop' | 'settle' | 'close' | 'closed';

export const ROUTE_STREAM_PHASES: readonly RouteStreamPhase[] = ['no-stream', 'opening', 'open', 'draining', 'ended'];
export const ROUTE_STREAM_EVENTS: readonly RouteStreamEvent[] = ['step', 'pipeline', 'open', 'ahead', 'answer', 'drop', 'settle', 'close', 'closed'];
export const INITIAL_ROUTE_STREAM_STATE: RouteStreamState = Object.freeze({ phase: 'no-stream', inFlight: 0 });

/** A transition that does not happen, and the status it fails with. */
export interface Refusal {
  readonly refused: AppError['code'];
  readonly message: string;
}

const CLOSED: Refusal = { refused: 'FAILED_PRECONDITION', message: 'the cloud conversation is closed' };
const BUSY: Refusal = { refused: 'FAILED_PRECONDITION', message: 'a step of this conversation is still in flight: only one conditional step may join it' };
/** The conversation's own bug, never the loop's or the cloud's. */
const internal = (message: string): Refusal => ({ refused: 'INTERNAL', message });

export function routeStreamTransition(state: RouteStreamState, event: RouteStreamEvent): RouteStreamState | Refusal {
  const { phase, inFlight } = state;
  const closing = phase === 'draining' || phase === 'ended';
  const live = phase === 'opening' || phase === 'open';
  switch (event) {
    case 'step':
      return closing ? CLOSED : inFlight > 0 ? BUSY : { phase, inFlight: 1 };
    case 'pipeline':
      // Behind a step whose stream was dropped there is nothing to join: the step must settle first.
      if (closing) return CLOSED;
      if (inFlight === 0) return internal('a conditional step joins a step in flight, and none is');
      return inFlight === 2 || !live ? BUSY : { phase, inFlight: 2 };
    case 'open':
      if (closing) return CLOSED;
      if (live) return internal('a stream is open already');
      // For the one step in flight (its first try, or its resend): a conditional step is never sent again.
      return inFlight === 1 ? { phase: 'opening', inFlight } : internal('a stream opens for the one step in flight');
    case 'ahead':
      if (closing) return CLOSED;
      return live || inFlight > 0 ? internal('a stream opens ahead only before any step') : { phase: 'opening', inFlight };
    case 'answer':
      // A result read from a stream dropped or closed meanwhile changes nothing.
      if (inFlight === 0) return internal('a result arrived with no step in flight');
      return phase === 'opening' ? { phase: 'open', inFlight } : state;
    case 'drop':
      // Dropping what is not there is nothing; a draining stream belongs to close.
      return live ? { phase: 'no-stream', inFlight } : state;
    case 'settle':
      return inFlight === 0 ? internal('a step settled with none in flight') : { phase, inFlight: (inFlight - 1) as 0 | 1 };
    case 'close':
      return closing ? CLOSED : { phase: 'draining', inFlight };
    case 'closed':
      return phase === 'draining' ? { phase: 'ended', inFlight } : internal('close ended without beginning');
  }
}

export function isRefusal(next: RouteStreamState | Refusal): next is Refusal {
  return 'refused' in next;
}

/** The next state; a refusal is thrown as an AppError with its status code. */
export function enterRouteStreamState(state: RouteStreamState, event: RouteStreamEvent): RouteStreamState {
  const next = routeStreamTransition(state, event);
  if (isRefusal(next)) throw new AppError(next.refused, next.message);
  return next;
}

/**
 * Whether a step whose stream ended before the shim looked at it goes out again: only when it is the one
 * step in flight (a conditional step sent behind it would have to be sent again too: pipelined steps never
 * are) and the conversation is not closing (close owns what is left).
 */
export function mayResend(state: RouteStreamState): boolean {
  return state.phase === 'no-stream' && state.inFlight === 1;
}
