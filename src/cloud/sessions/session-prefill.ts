/**
 * Computing ahead of a step: the edge sent context the shim has no step for yet, so the backend computes
 * its cache now and the next step reuses it.
 * - A prefill ahead (proto `open.prefill`): the edge opened its session before it had a token to route. It
 *   answers `prefilled`; without a backend slot in time it computes nothing and says `overloaded` (the first
 *   step then computes the context itself), which is no failure. A backend failure ends the stream as a
 *   step's would: the edge sends its step again on a new stream (it knows the step was never read).
 * - An extend (proto `extend`): tokens the edge decided itself, sent as it decides them. They join the
 *   context like a step's delta; they are computed only when no other message waits on the stream (a step
 *   behind them computes them anyway, and extends behind them are computed together), and nothing is
 *   answered, so a computation that fails or finds no slot is dropped: the next step computes what is missing.
 * Both take a backend slot like a step (an extend only a free one: it never queues in front of steps) and
 * stay under the step deadline. A backend that keeps nothing between requests (no `prefill`) computes nothing.
 *
 * @example
 * if (open.prefill) yield await prefillAhead(route, ctx); // { prefilled: { contextLength, cachedTokens, ... } }
 * await extendAhead(route, ctx, extend, requests.waiting()); // appended, and computed when nothing waits
 */
import type { ContextExtend__Output, RouteResponse } from '../../shared/grpc/proto.ts';
import { errorMessage } from '../../shared/errors.ts';
import type { Logger } from '../../shared/process/logger.ts';
import type { Backend, BackendPrefillResult, BackendSequence } from '../backends/backend.ts';
import { withDeadline } from '../backends/backend-deadline.ts';
import type { RoutingSession, SessionStore } from './session-store.ts';
import type { AdmissionLoad, StepAdmission } from '../admission/step-admission.ts';
import { checkExtend } from './route-request-checks.ts';

/** The opened session, as route-session.ts holds it. */
interface PrefillRoute {
  readonly session: RoutingSession;
  readonly sequence: BackendSequence;
  readonly stepTimeoutMs: number;
  readonly signal: AbortSignal;
}

interface PrefillContext {
  admission: StepAdmission;
  store: SessionStore;
  log: Logger;
}

/** What computing the context gave: nothing to compute with, no slot in time, or the backend's result. */
type Computed = { kind: 'no-cache' } | { kind: 'overloaded' } | { kind: 'computed'; result: BackendPrefillResult; load: AdmissionLoad };

export async function prefillAhead(route: PrefillRoute, ctx: PrefillContext): Promise<RouteResponse> {
  const { session } = route;
  const { admission, log } = ctx;
  const contextLength = session.ids.length;
  const received = performance.now();
  const nothing = { contextLength, cachedTokens: 0, prefilledTokens: 0, backendMs: 0 };
  const computed = await computeContext(route, ctx, 'prefill');
  switch (computed.kind) {
    case 'no-cache':
      return { prefilled: { ...nothing, overloaded: false, load: admission.load() } };
    case 'overloaded':
      log.debug('prefill overloaded', { session: session.id, context: contextLength, ...admission.load() });
      return { prefilled: { ...nothing, overloaded: true, load: admission.load() } };
    case 'computed': {
      const { result, load } = computed;
      log.debug('prefill', { session: session.id, context: contextLength, ...result, shimMs: performance.now() - received });
      return { prefilled: { contextLength, ...result, overloaded: false, load } };
    }
  }
}

/**
 * Appends an extend to the session's context (checked like a step's delta: a gap, an overlap or a bad id
 * fails the stream) and computes the context when `waiting` says no other message is behind it.
 */
export async function extendAhead(
  route: PrefillRoute,
  ctx: PrefillContext & { backend: Pick<Backend, 'info'> },
  extend: ContextExtend__Output,
  waiting: number,
): Promise<void> {
  const { session } = route;
  const sources = checkExtend(extend, session.ids.length, ctx.backend.info);
  ctx.store.append(session, extend.offset, extend.ids, sources);
  if (waiting > 0) return;
  try {
    const computed = await computeContext(route, ctx, `extend-${session.ids.length}`, { wait: false });
    if (computed.kind === 'computed') ctx.log.debug('extend', { session: session.id, context: session.ids.length, ...computed.result });
  } catch (e) {
    // Nobody waits for an extend's answer: the stream's end would fail the next step for nothing it did.
    if (route.signal.aborted) throw e;
    ctx.log.debug('extend not computed', { session: session.id, context: session.ids.length, error: errorMessage(e) });
  }
}

/**
 * Computes the session's context into the backend's cache under a slot and the step deadline. `wait: false`:
 * only when a slot is free now (an extend never queues in front of steps, and is no refusal when it cannot).
 */
async function computeContext(route: PrefillRoute, ctx: PrefillContext, what: string, { wait = true } = {}): Promise<Computed> {
  const { session, sequence } = route;
  const { admission, store } = ctx;
  if (!sequence.prefill) return { kind: 'no-cache' };
  session.busy = true;
  try {
    const slot = wait ? await admission.acquire(route.stepTimeoutMs, route.signal) : (admission.tryAcquire(route.signal) ?? 'overloaded');
    if (slot === 'overloaded') return { kind: 'overloaded' };
    try {
      const result = await withDeadline(route.signal, Math.max(1, Math.round(route.stepTimeoutMs - slot.waitedMs)), (signal) =>
        sequence.prefill!({
          context: session.ids,
          requestId: `${session.id}-${what}`,
          ...(session.routingKey ? { routingKey: session.routingKey } : {}),
          signal,
        }),
      );
      // Computing ahead is not a step: its time stays out of the steps' moving average, which predicts a step's.
      return { kind: 'computed', result, load: slot.release(false) };
    } catch (e) {
      slot.release(false);
      throw e;
    }
  } finally {
    session.busy = false;
    store.touch(session);
  }
}
