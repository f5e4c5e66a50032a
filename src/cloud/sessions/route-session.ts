/**
 * The shim's core: one routing session as an async generator, knowing nothing of gRPC. It reads the
 * stream's requests through the stream's state machine (route-session-states.ts: `open`, then steps, until
 * the edge half-closes), checks them (route-request-checks.ts), keeps the context in the session store, asks
 * the backend for each span under a deadline once the shim's admission control lets it (step-admission.ts:
 * a step that would miss its deadline waiting for the backend is answered `overloaded` instead), and yields
 * the responses: `opened` (then `prefilled` when `open` asked for a prefill ahead: session-prefill.ts), one
 * `step` per step (each with the shim's load), and always a final `end` (code 0, or the error's status code,
 * after which the error is rethrown for the transport). An `extend` is taken in and answers nothing
 * (session-prefill.ts too).
 */
import { AppError } from '../../shared/errors.ts';
import { grpcCode, toAppError } from '../../shared/grpc/errors.ts';
import type { OpenSession__Output, RouteRequest__Output, RouteResponse, RouteStep__Output } from '../../shared/grpc/proto.ts';
import { abortReason } from '../../shared/grpc/stream.ts';
import { fromWireSources, toWireFingerprint, toWireFinish } from '../../shared/grpc/wire.ts';
import type { TokenizerFingerprint } from '../../shared/text/tokenizer-fingerprint.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { Backend, BackendSequence, BackendStepResult, SamplingSettings } from '../backends/backend.ts';
import type { ShimConfig } from '../config.ts';
import type { Logger } from '../../shared/process/logger.ts';
import { checkIds, checkOpen, checkStep, validateSampling } from './route-request-checks.ts';
import { nextRouteSessionState, routeRequestRead, type RouteSessionState } from './route-session-states.ts';
import { SessionExpiredError, type RoutingSession, type SessionStore } from './session-store.ts';
import { spanText } from '../backends/span-text.ts';
import { loggableMessage } from '../quoting-error.ts';
import { withDeadline } from '../backends/backend-deadline.ts';
import { extendAhead, prefillAhead } from './session-prefill.ts';
import type { AdmissionLoad, StepAdmission } from '../admission/step-admission.ts';

export interface ShimContext {
  config: Readonly<ShimConfig>;
  store: SessionStore;
  backend: Backend;
  /** The backend's admission control, shared by all sessions of the shim. */
  admission: StepAdmission;
  /** Decodes reply text when the backend returns none. */
  tokenizer: TextTokenizer | undefined;
  /** The tokenizer's vocabulary digest (src/shared/text/vocabulary.ts), which Score replies carry; absent without one. */
  vocabularySha256?: string;
  /** The tokenizer's fingerprint (src/shared/text/tokenizer-fingerprint.ts), which `opened` and Describe carry; absent without one. */
  tokenizerFingerprint?: TokenizerFingerprint;
  log: Logger;
}

export interface RequestSource {
  next(signal: AbortSignal): Promise<IteratorResult<RouteRequest__Output>>;
  /** Messages received and not read yet: an extend is computed only when nothing waits behind it. */
  waiting(): number;
}

interface Totals {
  steps: number;
  generatedTokens: number;
  contextTokens: number;
}

/** The final message of a stream. */
export function endMessage(error: unknown, totals: Totals = { steps: 0, generatedTokens: 0, contextTokens: 0 }): RouteResponse {
  if (error === undefined) return { end: { code: 0, message: 'OK', ...totals } };
  const e = toAppError(error);
  return { end: { code: grpcCode(e.code), message: e.message, ...totals, expired: e instanceof SessionExpiredError } };
}

/** An opened session and what its steps need. */
interface OpenRoute {
  readonly session: RoutingSession;
  readonly sequence: BackendSequence;
  /** The session's sampling settings: a step may change them. */
  sampling: SamplingSettings;
  readonly stepTimeoutMs: number;
  /** Aborts with the stream, or with the session (idle expiry, shutdown). */
  readonly signal: AbortSignal;
}

export async function* routeSession(requests: RequestSource, ctx: ShimContext, signal: AbortSignal): AsyncGenerator<RouteResponse> {
  const { store, backend, config, log } = ctx;
  let state: RouteSessionState = 'awaiting-open';
  // Kept in the store from `open` on, closed in `finally` even when opening the backend's sequence fails.
  let session: RoutingSession | undefined;
  let route: OpenRoute | undefined;
  let live = signal;
  const totals = (): Totals => ({ steps: session?.steps ?? 0, generatedTokens: session?.generated ?? 0, contextTokens: session?.ids.length ?? 0 });
  try {
    while (state !== 'ended') {
      const read = routeRequestRead(await requests.next(live));
      state = nextRouteSessionState(state, read.event);
      if (read.event === 'open') {
        const opened = openSession(read.open, ctx);
        session = opened.session;
        live = AbortSignal.any([signal, session.signal]);
        route = { ...opened, stepTimeoutMs: stepDeadline(read.open, config), signal: live, sequence: backend.openSequence(session.id) };
        log.debug('session opened', { session: session.id, requestId: session.requestId, routingKey: session.routingKey, context: session.ids.length });
        const tokenizer = ctx.tokenizerFingerprint ? { tokenizer: toWireFingerprint(ctx.tokenizerFingerprint) } : {};
        yield {
          opened: {
            sessionId: session.id,
            backend: backend.info.name,
            vocabSize: backend.info.vocabSize ?? 0,
            maxContext: backend.info.maxContext ?? 0,
            ...tokenizer,
          },
        };
        // Before the next message is read: a step sent behind the prefill reuses what it computed.
        if (read.open.prefill) yield await prefillAhead(route, ctx);
      } else if (read.event === 'step') {
        // The state machine admits a step only once the session is open.
        const open = route!;
        open.session.busy = true;
        try {
          yield await serveStep(read.step, open, ctx);
        } finally {
          open.session.busy = false;
          store.touch(open.session);
        }
      } else if (read.event === 'extend') {
        await extendAhead(route!, ctx, read.extend, requests.waiting());
      }
    }
    if (session) log.debug('session closed', { session: session.id, ...totals() });
    yield endMessage(undefined, totals());
  } catch (e) {
    // Any failure ends the stream, whatever its state.
    const error = live.aborted && !(e instanceof AppError) ? abortReason(live) : toAppError(e);
    log[error.code === 'INTERNAL' ? 'error' : 'debug']('session failed', {
      session: session?.id,
      code: error.code,
      error: loggableMessage(error, config.logText),
    });
    yield endMessage(error, totals());
    throw error;
  } finally {
    route?.sequence.dispose();
    if (session) store.close(session);
  }
}

/** The session's step deadline: the edge's (`open.step_timeout_ms`) when shorter than the shim's own. */
function stepDeadline(open: OpenSession__Output, config: Readonly<ShimConfig>): number {
  return open.stepTimeoutMs > 0 ? Math.min(open.stepTimeoutMs, config.backendTimeoutMs) : config.backendTimeoutMs;
}

function openSession(open: OpenSession__Output, ctx: ShimContext): { session: RoutingSession; sampling: SamplingSettings } {
  const { store, backend, config } = ctx;
  const routingKey = checkOpen(open, backend.info);
  const sampling = validateSampling(open.sampling, config, backend.info.vocabSize);
  const sources = open.contextSources.length ? fromWireSources(open.contextSources, 'context_sources') : [];
  return { session: store.open(open.requestId, open.contextIds, sources, routingKey), sampling };
}

/** How a step was answered: served by the backend, skipped (its assumption failed), or overloaded. */
type StepOutcome = { kind: 'skipped' } | { kind: 'overloaded' } | { kind: 'served'; result: BackendStepResult; contextBefore: number; load: AdmissionLoad };

/** Serves one step and says so in the log; served, skipped or overloaded, it is one more step of the session. */
async function serveStep(step: RouteStep__Output, route: OpenRoute, ctx: ShimContext): Promise<RouteResponse> {
  const { session } = route;
  const { admission, log } = ctx;
  const received = performance.now();
  if (step.sampling) route.sampling = validateSampling(step.sampling, ctx.config, ctx.backend.info.vocabSize);
  const outcome = await answerStep(step, route, ctx, received);
  session.steps++;
  switch (outcome.kind) {
    case 'skipped':
      log.debug('step skipped', { session: session.id, tokenIndex: step.tokenIndex, offset: step.offset, contextLength: session.ids.length });
      return unansweredResponse(session, performance.now() - received, admission.load(), { skipped: true });
    case 'overloaded':
      log.debug('step overloaded', { session: session.id, tokenIndex: step.tokenIndex, contextLength: session.ids.length, ...admission.load() });
      return unansweredResponse(session, performance.now() - received, admission.load(), { overloaded: true });
    case 'served': {
      const { result, contextBefore, load } = outcome;
      const response = stepResponse(result, ctx, session, contextBefore, performance.now() - received, load);
      // The routing decision behind the step (the seed paper's token index, score and threshold), for the
      // records; sizes only, and the step's ids and text only with --log-text.
      log.debug('step', {
        session: session.id,
        tokenIndex: step.tokenIndex,
        routerScore: step.routerScore,
        threshold: step.threshold,
        hiddenState: step.slmHiddenState.length,
        delta: step.ids.length,
        returned: result.ids.length,
        cachedTokens: result.cachedTokens,
        backendMs: result.backendMs,
        ...(ctx.config.logText ? { deltaIds: step.ids, returnedIds: result.ids, text: response.step!.text } : {}),
      });
      return response;
    }
  }
}

/**
 * Appends the step's delta and asks the backend for its span, unless the step is skipped (a conditional
 * step whose assumed context is not the session's: the context is untouched) or its slot is refused.
 */
async function answerStep(step: RouteStep__Output, route: OpenRoute, ctx: ShimContext, received: number): Promise<StepOutcome> {
  const { session } = route;
  const { store, backend, admission, config } = ctx;
  const { maxTokens, sources } = checkStep(step, session.ids.length, config, backend.info);
  if (step.conditional) {
    if (!store.appendConditional(session, step.offset, step.ids, sources)) return { kind: 'skipped' };
  } else store.append(session, step.offset, step.ids, sources);
  const slot = await admission.acquire(route.stepTimeoutMs - (performance.now() - received), route.signal);
  if (slot === 'overloaded') {
    // A conditional step behind this one assumed the token it did not return: it is skipped.
    session.skippedLast = true;
    return { kind: 'overloaded' };
  }
  let result: BackendStepResult;
  let load: AdmissionLoad;
  try {
    // What the step spent waiting for its slot comes off its deadline.
    result = await withDeadline(route.signal, Math.max(1, Math.round(route.stepTimeoutMs - slot.waitedMs)), (stepSignal) =>
      route.sequence.step({
        context: session.ids,
        maxTokens,
        sampling: route.sampling,
        requestId: `${session.id}-${session.steps}`,
        ...(session.routingKey ? { routingKey: session.routingKey } : {}),
        signal: stepSignal,
      }),
    );
    load = slot.release(true);
  } catch (e) {
    slot.release(false);
    throw e;
  }
  checkIds(result.ids, backend.info.vocabSize, 'backend', 'the backend returned');
  const contextBefore = session.ids.length;
  store.appendGenerated(session, result.ids);
  return { kind: 'served', result, contextBefore, load };
}

/** The result of a step with nothing generated: skipped (the context unchanged) or overloaded (its delta appended). */
function unansweredResponse(session: RoutingSession, elapsedMs: number, load: AdmissionLoad, why: { skipped: true } | { overloaded: true }): RouteResponse {
  return {
    step: { ids: [], text: '', logprobs: [], top: [], cachedTokens: 0, backendMs: 0, shimMs: elapsedMs, contextLength: session.ids.length, ...why, load },
  };
}

function stepResponse(
  result: BackendStepResult,
  ctx: ShimContext,
  session: RoutingSession,
  before: number,
  elapsedMs: number,
  load: AdmissionLoad,
): RouteResponse {
  const text = result.text ?? (ctx.tokenizer ? spanText(ctx.tokenizer, session.ids.slice(Math.max(0, before - 8), before), result.ids) : '');
  return {
    step: {
      ids: result.ids,
      text,
      logprobs: result.logprobs,
      top: result.top.map((alts) => ({ ids: alts.map((a) => a.id), logprobs: alts.map((a) => a.logprob) })),
      cachedTokens: result.cachedTokens,
      backendMs: result.backendMs,
      shimMs: Math.max(0, elapsedMs - result.backendMs),
      finishReason: toWireFinish(result.finish),
      contextLength: session.ids.length,
      load,
    },
  };
}
