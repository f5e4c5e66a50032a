/**
 * One Route stream on the shim as a state machine, pure: it waits for `open`, serves steps (and takes in
 * extends) until the edge half-closes, and ends. The table is the whole of it: each state against what the edge sends next (or its
 * half-close) gives the next state, or the status code and words the stream fails with. routeSession
 * (route-session.ts) does the serving around it; any failure there ends the stream from whatever state.
 *
 * @example
 * let state: RouteSessionState = 'awaiting-open';
 * state = nextRouteSessionState(state, 'open');   // 'open'
 * nextRouteSessionState(state, 'open');           // throws FAILED_PRECONDITION: a stream opens its session once
 */
import { AppError } from '../../shared/errors.ts';
import type { ContextExtend__Output, OpenSession__Output, RouteRequest__Output, RouteStep__Output } from '../../shared/grpc/proto.ts';

export type RouteSessionState = 'awaiting-open' | 'open' | 'ended';

/** What the edge sent next: `open`, a `step`, a message with neither, or nothing more (it half-closed). */
export type RouteSessionEvent = 'open' | 'step' | 'extend' | 'empty' | 'half-close';

/** A transition that does not happen: the stream fails with this status. */
export interface Refusal {
  readonly refused: AppError['code'];
  readonly message: string;
}

const FIRST_MUST_OPEN: Refusal = { refused: 'FAILED_PRECONDITION', message: 'the first message of a stream must be `open`' };
const OPENS_ONCE: Refusal = { refused: 'FAILED_PRECONDITION', message: 'a stream opens its session once: only `step` and `extend` messages may follow `open`' };
/** Nothing is read after the final message: this is the shim's bug. */
const AFTER_END: Refusal = { refused: 'INTERNAL', message: 'the stream has ended: nothing follows its final message' };

export const ROUTE_SESSION_STATES: readonly RouteSessionState[] = ['awaiting-open', 'open', 'ended'];
export const ROUTE_SESSION_EVENTS: readonly RouteSessionEvent[] = ['open', 'step', 'extend', 'empty', 'half-close'];

export const ROUTE_SESSION_TRANSITIONS: Readonly<Record<RouteSessionState, Readonly<Record<RouteSessionEvent, RouteSessionState | Refusal>>>> = {
  'awaiting-open': { open: 'open', step: FIRST_MUST_OPEN, extend: FIRST_MUST_OPEN, empty: FIRST_MUST_OPEN, 'half-close': 'ended' },
  open: { open: OPENS_ONCE, step: 'open', extend: 'open', empty: OPENS_ONCE, 'half-close': 'ended' },
  ended: { open: AFTER_END, step: AFTER_END, extend: AFTER_END, empty: AFTER_END, 'half-close': AFTER_END },
};

/** The next state; a refusal is thrown as an AppError with its status code. */
export function nextRouteSessionState(state: RouteSessionState, event: RouteSessionEvent): RouteSessionState {
  const next = ROUTE_SESSION_TRANSITIONS[state][event];
  if (typeof next !== 'string') throw new AppError(next.refused, next.message);
  return next;
}

/** A read of the request stream, as the machine's event with what it carries. */
export type RouteRequestRead =
  | { readonly event: 'open'; readonly open: OpenSession__Output }
  | { readonly event: 'step'; readonly step: RouteStep__Output }
  | { readonly event: 'extend'; readonly extend: ContextExtend__Output }
  | { readonly event: 'empty' | 'half-close' };

export function routeRequestRead(message: IteratorResult<RouteRequest__Output>): RouteRequestRead {
  if (message.done) return { event: 'half-close' };
  const { open, step, extend } = message.value;
  if (open) return { event: 'open', open };
  if (step) return { event: 'step', step };
  if (extend) return { event: 'extend', extend };
  return { event: 'empty' };
}
