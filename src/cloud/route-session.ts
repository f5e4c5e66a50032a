/**
 * The shim's core: one routing session as an async generator, knowing nothing of gRPC. It reads the
 * stream's requests (open, then steps), keeps the context in the session store, asks the backend for each
 * span under a deadline once the shim's admission control lets it (step-admission.ts: a step that would
 * miss its deadline waiting for the backend is answered `overloaded` instead), and yields the responses:
 * `opened`, one `step` per step (each with the shim's load), and always a final `end` (code 0, or the
 * error's status code, after which the error is rethrown for the transport).
 */
import { AppError } from '../shared/errors.ts';
import { grpcCode, toAppError } from '../shared/grpc/errors.ts';
import type { OpenSession__Output, RouteRequest__Output, RouteResponse, RouteStep__Output, Sampling__Output } from '../shared/grpc/proto.ts';
import { abortReason } from '../shared/grpc/stream.ts';
import { fromWireSources, toWireFinish } from '../shared/grpc/wire.ts';
import type { TextTokenizer } from '../shared/tokenizer.ts';
import type { Backend, BackendStepResult, SamplingSettings } from './backend.ts';
import type { ShimConfig } from './config.ts';
import type { Logger } from '../shared/logger.ts';
import { SessionExpiredError, type RoutingSession, type SessionStore } from './session-store.ts';
import { sessionRoutingKey } from './session-routing-key.ts';
import { spanText } from './span-text.ts';
import type { AdmissionLoad, StepAdmission } from './step-admission.ts';

export interface ShimContext {
  config: Readonly<ShimConfig>;
  store: SessionStore;
  backend: Backend;
  /** The backend's admission control, shared by all sessions of the shim. */
  admission: StepAdmission;
  /** Decodes reply text when the backend returns none. */
  tokenizer: TextTokenizer | undefined;
  /** The tokenizer's vocabulary digest (src/shared/vocabulary.ts), which Score replies carry; absent without one. */
  vocabularySha256?: string;
  log: Logger;
}

export interface RequestSource {
  next(signal: AbortSignal): Promise<IteratorResult<RouteRequest__Output>>;
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

export async function* routeSession(requests: RequestSource, ctx: ShimContext, signal: AbortSignal): AsyncGenerator<RouteResponse> {
  const { store, backend, config, log, admission } = ctx;
  let session: RoutingSession | undefined;
  let backendSequence: ReturnType<Backend['openSequence']> | undefined;
  let live = signal;
  const totals = (): Totals => ({ steps: session?.steps ?? 0, generatedTokens: session?.generated ?? 0, contextTokens: session?.ids.length ?? 0 });
  try {
    const first = await requests.next(signal);
    if (first.done) return yield endMessage(undefined);
    const open = first.value.open;
    if (!open) throw new AppError('FAILED_PRECONDITION', 'the first message of a stream must be `open`');
    const opened = openSession(open, ctx);
    session = opened.session;
    let sampling = opened.sampling;
    const stepTimeoutMs = open.stepTimeoutMs > 0 ? Math.min(open.stepTimeoutMs, config.backendTimeoutMs) : config.backendTimeoutMs;
    live = AbortSignal.any([signal, session.signal]);
    backendSequence = backend.openSequence(session.id);
    log.debug('session opened', { session: session.id, requestId: session.requestId, routingKey: session.routingKey, context: session.ids.length });
    yield {
      opened: { sessionId: session.id, backend: backend.info.name, vocabSize: backend.info.vocabSize ?? 0, maxContext: backend.info.maxContext ?? 0 },
    };

    while (true) {
      const message = await requests.next(live);
      if (message.done) break;
      const step = message.value.step;
      if (!step) throw new AppError('FAILED_PRECONDITION', 'a stream opens its session once: only `step` messages may follow `open`');
      const received = performance.now();
      session.busy = true;
      try {
        if (step.sampling) sampling = validateSampling(step.sampling, config, backend.info.vocabSize);
        const maxTokens = appendStep(step, session, ctx);
        if (maxTokens === 'skipped') {
          session.steps++;
          log.debug('step skipped', { session: session.id, tokenIndex: step.tokenIndex, offset: step.offset, contextLength: session.ids.length });
          yield skippedResponse(session, performance.now() - received, admission.load());
          continue;
        }
        const slot = await admission.acquire(stepTimeoutMs - (performance.now() - received), live);
        if (slot === 'overloaded') {
          session.steps++;
          // A conditional step behind this one assumed the token it did not return: it is skipped.
          session.skippedLast = true;
          log.debug('step overloaded', { session: session.id, tokenIndex: step.tokenIndex, contextLength: session.ids.length, ...admission.load() });
          yield overloadedResponse(session, performance.now() - received, admission.load());
          continue;
        }
        let result: BackendStepResult;
        let load: AdmissionLoad;
        try {
          // What the step spent waiting for its slot comes off its deadline.
          result = await withDeadline(live, Math.max(1, Math.round(stepTimeoutMs - slot.waitedMs)), (stepSignal) =>
            backendSequence!.step({
              context: session!.ids,
              maxTokens,
              sampling,
              requestId: `${session!.id}-${session!.steps}`,
              ...(session!.routingKey ? { routingKey: session!.routingKey } : {}),
              signal: stepSignal,
            }),
          );
          load = slot.release(true);
        } catch (e) {
          slot.release(false);
          throw e;
        }
        checkIds(result.ids, backend.info.vocabSize, 'the backend returned');
        const before = session.ids.length;
        store.appendGenerated(session, result.ids);
        session.steps++;
        // The routing decision behind the step (the seed paper's token index, score and threshold), for the records.
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
        });
        yield stepResponse(result, ctx, session, before, performance.now() - received, load);
      } finally {
        session.busy = false;
        store.touch(session);
      }
    }
    log.debug('session closed', { session: session.id, ...totals() });
    yield endMessage(undefined, totals());
  } catch (e) {
    const error = live.aborted && !(e instanceof AppError) ? abortReason(live) : toAppError(e);
    log[error.code === 'INTERNAL' ? 'error' : 'debug']('session failed', { session: session?.id, code: error.code, error: error.message });
    yield endMessage(error, totals());
    throw error;
  } finally {
    backendSequence?.dispose();
    if (session) store.close(session);
  }
}

function openSession(open: OpenSession__Output, ctx: ShimContext): { session: RoutingSession; sampling: SamplingSettings } {
  const { store, backend, config } = ctx;
  if (open.requestId.length > 200) throw new AppError('INVALID_ARGUMENT', 'request_id is longer than 200 characters');
  const routingKey = sessionRoutingKey(open);
  if (open.contextIds.length === 0) throw new AppError('INVALID_ARGUMENT', 'open needs the context: at least one token id');
  if (open.contextSources.length !== 0 && open.contextSources.length !== open.contextIds.length) {
    throw new AppError('INVALID_ARGUMENT', `context_sources has ${open.contextSources.length} entries for ${open.contextIds.length} ids`);
  }
  checkIds(open.contextIds, backend.info.vocabSize, 'context_ids holds');
  checkContext(open.contextIds.length, backend.info.maxContext);
  const sampling = validateSampling(open.sampling, config, backend.info.vocabSize);
  const sources = open.contextSources.length ? fromWireSources(open.contextSources, 'context_sources') : [];
  return { session: store.open(open.requestId, open.contextIds, sources, routingKey), sampling };
}

/**
 * Validates a step and appends its delta; returns the span to ask for, or `skipped` for a conditional step
 * whose assumed context is not the session's (the context is then untouched).
 */
function appendStep(step: RouteStep__Output, session: RoutingSession, ctx: ShimContext): number | 'skipped' {
  const { backend, config, store } = ctx;
  if (step.sources.length !== step.ids.length) {
    throw new AppError('INVALID_ARGUMENT', `a step has ${step.ids.length} ids but ${step.sources.length} sources`);
  }
  // Only recorded by the shim, but a step that claims a threshold outside [0, 1] comes from a broken edge.
  if (!(step.threshold >= 0 && step.threshold <= 1)) throw new AppError('INVALID_ARGUMENT', `threshold must be in [0, 1], got ${step.threshold}`);
  if (!Number.isFinite(step.routerScore)) throw new AppError('INVALID_ARGUMENT', `router_score must be a finite number, got ${step.routerScore}`);
  const maxTokens = step.maxTokens || 1;
  if (maxTokens > config.maxSpanTokens) throw new AppError('INVALID_ARGUMENT', `max_tokens ${maxTokens} is above this shim's limit of ${config.maxSpanTokens}`);
  checkIds(step.ids, backend.info.vocabSize, 'the step holds');
  checkContext((step.conditional ? Math.min(step.offset, session.ids.length) : session.ids.length) + step.ids.length, backend.info.maxContext);
  const sources = fromWireSources(step.sources, 'sources');
  // A step appends what was generated since the last one; the prompt came with `open` (a reopened session
  // sends its whole history there), so a prompt token here is an edge that lost track of its context.
  const prompt = sources.indexOf('prompt');
  if (prompt >= 0) {
    throw new AppError('INVALID_ARGUMENT', `sources[${prompt}] is TOKEN_SOURCE_PROMPT: a step carries generated tokens only (slm, llm, fallback); prompt tokens belong in open.context_ids`);
  }
  if (step.conditional) return store.appendConditional(session, step.offset, step.ids, sources) ? maxTokens : 'skipped';
  store.append(session, step.offset, step.ids, sources);
  return maxTokens;
}

/** The result of a skipped conditional step: nothing generated, the context length unchanged. */
function skippedResponse(session: RoutingSession, elapsedMs: number, load: AdmissionLoad): RouteResponse {
  return { step: { ids: [], text: '', logprobs: [], top: [], cachedTokens: 0, backendMs: 0, shimMs: elapsedMs, contextLength: session.ids.length, skipped: true, load } };
}

/** The result of a step refused for the backend's load: nothing generated, the step's delta appended. */
function overloadedResponse(session: RoutingSession, elapsedMs: number, load: AdmissionLoad): RouteResponse {
  return { step: { ids: [], text: '', logprobs: [], top: [], cachedTokens: 0, backendMs: 0, shimMs: elapsedMs, contextLength: session.ids.length, overloaded: true, load } };
}

function stepResponse(result: BackendStepResult, ctx: ShimContext, session: RoutingSession, before: number, elapsedMs: number, load: AdmissionLoad): RouteResponse {
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

function validateSampling(sampling: Sampling__Output | null, config: Readonly<ShimConfig>, vocabSize: number | undefined): SamplingSettings {
  const s = sampling ?? { temperature: 0, topP: 0, stopTokenIds: [], topLogprobs: 0 };
  if (!Number.isFinite(s.temperature) || s.temperature < 0) throw new AppError('INVALID_ARGUMENT', `temperature must be ≥ 0, got ${s.temperature}`);
  if (!Number.isFinite(s.topP) || s.topP < 0 || s.topP > 1) throw new AppError('INVALID_ARGUMENT', `top_p must be in (0, 1], got ${s.topP}`);
  if (s.topLogprobs > config.maxTopLogprobs) {
    throw new AppError('INVALID_ARGUMENT', `top_logprobs ${s.topLogprobs} is above this shim's limit of ${config.maxTopLogprobs}`);
  }
  // An id the model can never produce would never stop a span: the edge meant another vocabulary.
  checkIds(s.stopTokenIds, vocabSize, 'stop_token_ids holds');
  return Object.freeze({
    temperature: s.temperature,
    topP: s.topP === 0 ? 1 : s.topP,
    seed: s.seed,
    stopTokenIds: Object.freeze([...s.stopTokenIds]),
    topLogprobs: s.topLogprobs,
  });
}

function checkIds(ids: readonly number[], vocabSize: number | undefined, what: string): void {
  if (vocabSize === undefined) return;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i]! >= vocabSize) throw new AppError(what.startsWith('the backend') ? 'INTERNAL' : 'INVALID_ARGUMENT', `${what} token id ${ids[i]} (index ${i}), outside the vocabulary [0, ${vocabSize})`);
  }
}

function checkContext(length: number, maxContext: number | undefined): void {
  if (maxContext !== undefined && length > maxContext) {
    throw new AppError('OUT_OF_RANGE', `context of ${length} tokens exceeds the model's window of ${maxContext}`);
  }
}

/** Runs `fn` with a signal that aborts with `parent`, or with DEADLINE_EXCEEDED after `ms`. */
async function withDeadline<T>(parent: AbortSignal, ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(parent.reason);
  if (parent.aborted) onAbort();
  else parent.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new AppError('DEADLINE_EXCEEDED', `the backend did not answer within ${ms} ms`)), ms);
  try {
    return await fn(controller.signal);
  } catch (e) {
    throw controller.signal.aborted ? abortReason(controller.signal) : e;
  } finally {
    clearTimeout(timer);
    parent.removeEventListener('abort', onAbort);
  }
}
