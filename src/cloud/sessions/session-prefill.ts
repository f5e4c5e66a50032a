/**
 * A prefill ahead (proto `open.prefill`): the edge opened its session before it had a token to route, so the
 * backend computes the context's cache now and the first step reuses it. It takes a backend slot like a
 * step and under the step deadline; without a slot in time it computes nothing and says `overloaded` (the
 * first step then computes the context itself), which is no failure. A backend that keeps nothing between
 * requests (no `prefill`) answers at once with nothing computed. A backend failure ends the stream as a
 * step's would: the edge sends its step again on a new stream (it knows the step was never read).
 *
 * @example
 * if (open.prefill) yield await prefillAhead(route, ctx); // { prefilled: { contextLength, cachedTokens, ... } }
 */
import type { RouteResponse } from '../../shared/grpc/proto.ts';
import type { Logger } from '../../shared/process/logger.ts';
import type { BackendSequence } from '../backends/backend.ts';
import { withDeadline } from '../backends/backend-deadline.ts';
import type { RoutingSession, SessionStore } from './session-store.ts';
import type { StepAdmission } from '../admission/step-admission.ts';

/** The opened session, as route-session.ts holds it. */
interface PrefillRoute {
  readonly session: RoutingSession;
  readonly sequence: BackendSequence;
  readonly stepTimeoutMs: number;
  readonly signal: AbortSignal;
}

export async function prefillAhead(route: PrefillRoute, ctx: { admission: StepAdmission; store: SessionStore; log: Logger }): Promise<RouteResponse> {
  const { session, sequence } = route;
  const { admission, store, log } = ctx;
  const contextLength = session.ids.length;
  const received = performance.now();
  if (!sequence.prefill) return { prefilled: { contextLength, cachedTokens: 0, prefilledTokens: 0, backendMs: 0, overloaded: false, load: admission.load() } };
  session.busy = true;
  try {
    const slot = await admission.acquire(route.stepTimeoutMs, route.signal);
    if (slot === 'overloaded') {
      log.debug('prefill overloaded', { session: session.id, context: contextLength, ...admission.load() });
      return { prefilled: { contextLength, cachedTokens: 0, prefilledTokens: 0, backendMs: 0, overloaded: true, load: admission.load() } };
    }
    try {
      const result = await withDeadline(route.signal, Math.max(1, Math.round(route.stepTimeoutMs - slot.waitedMs)), (signal) =>
        sequence.prefill!({
          context: session.ids,
          requestId: `${session.id}-prefill`,
          ...(session.routingKey ? { routingKey: session.routingKey } : {}),
          signal,
        }),
      );
      // A prefill is not a step: its time stays out of the steps' moving average, which predicts a step's.
      const load = slot.release(false);
      log.debug('prefill', {
        session: session.id,
        context: contextLength,
        cachedTokens: result.cachedTokens,
        prefilledTokens: result.prefilledTokens,
        backendMs: result.backendMs,
        shimMs: performance.now() - received,
      });
      return { prefilled: { contextLength, ...result, overloaded: false, load } };
    } catch (e) {
      slot.release(false);
      throw e;
    }
  } finally {
    session.busy = false;
    store.touch(session);
  }
}
