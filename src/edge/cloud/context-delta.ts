/**
 * The context-delta protocol of the edge ↔ cloud stream, pure (no gRPC, no timers): the edge's copy of the
 * context the shim holds, and the messages a step sends. A stream opens with the whole context; every later
 * step carries only what the shim has not seen (offset, ids and their sources), and its sampling settings
 * only when they changed. The tokens the shim returns join the copy as the shim appended them; a reply whose
 * context length disagrees with the copy means the copy is wrong, and the stream must be replaced.
 *
 * A conditional step (see proto/cloud_router.proto) is built while the step before it is in flight: it
 * starts where that step's reply will go and carries the edge's guess for it, so it must extend what was
 * sent by at least that token. Its ids join the copy only once it is answered.
 *
 * @example
 * const shim = new ShimContextCopy();
 * const [open, first] = shim.open(request, 'r1', 10_000, 'chat-42'); // the whole context, then an empty step
 * shim.answered(result);                                  // false: the shim disagrees, drop the stream
 * const next = shim.step(laterRequest);                   // only the ids the shim lacks
 */
import { AppError } from '../../shared/errors.ts';
import type { RouteRequest, RouteStep, Sampling, StepResult__Output } from '../../shared/grpc/proto.ts';
import { toWireSources } from '../../shared/grpc/wire.ts';
import type { CloudLoad, CloudStepReply, CloudStepRequest } from './cloud-client.ts';

/** The edge's copy of one stream's context on the shim: what was sent plus what the shim returned. */
export class ShimContextCopy {
  private ids: number[] = [];
  /** How much of the edge's context has been checked against `ids`. */
  private verified = 0;
  /** The sampling settings the shim holds, as JSON: a step sends its own only when they differ. */
  private samplingKey = '';

  /** Tokens the shim holds. */
  get length(): number {
    return this.ids.length;
  }

  /** The ids the shim holds (a copy). */
  get context(): number[] {
    return [...this.ids];
  }

  /**
   * The messages that open a stream: `open` with the whole context and the sampling settings, then the
   * step that asks for the next token (no ids: the context came with `open`). The copy starts over from it.
   */
  open(request: CloudStepRequest, requestId: string, stepTimeoutMs: number, routingKey = ''): RouteRequest[] {
    const sampling = wireSampling(request);
    this.ids = [...request.context];
    this.verified = this.ids.length;
    this.samplingKey = JSON.stringify(sampling);
    return [
      {
        open: {
          requestId,
          ...(routingKey ? { routingKey } : {}),
          sampling,
          contextIds: [...this.ids],
          contextSources: toWireSources(request.sources),
          stepTimeoutMs,
        },
      },
      { step: stepMessage(request, this.ids.length, [], []) },
    ];
  }

  /**
   * The message that opens a stream ahead of its first step (proto `open.prefill`): the whole context, for
   * the shim to prefill; the copy starts over from it, and the first step sends only what follows.
   */
  openAhead(request: CloudStepRequest, requestId: string, stepTimeoutMs: number, routingKey = ''): RouteRequest[] {
    const [open] = this.open(request, requestId, stepTimeoutMs, routingKey);
    return [{ open: { ...open!.open, prefill: true } }];
  }

  /** The step that sends what the shim lacks of `request.context` (which `matches` the copy); the copy takes it in. */
  step(request: CloudStepRequest): RouteRequest {
    const { from, ids, sources } = this.takeRest(request);
    return { step: { ...stepMessage(request, from, ids, sources), ...this.samplingChange(request) } };
  }

  /**
   * The extend (proto `extend`) that sends what the shim lacks of `request.context` (which `matches` the
   * copy), or undefined when it lacks nothing; the copy takes it in (`forget` takes it back, unsent).
   */
  extend(request: CloudStepRequest): RouteRequest | undefined {
    if (request.context.length === this.ids.length) return undefined;
    const { from, ids, sources } = this.takeRest(request);
    return { extend: { offset: from, ids, sources } };
  }

  /** What `request.context` holds past the copy (which it `matches`), taken into the copy: a step's or an extend's delta. */
  private takeRest(request: CloudStepRequest): { from: number; ids: number[]; sources: ReturnType<typeof toWireSources> } {
    const from = this.ids.length;
    const ids = request.context.slice(from);
    this.ids.push(...ids);
    this.verified = this.ids.length;
    return { from, ids, sources: toWireSources(request.sources.slice(from)) };
  }

  /** Takes back what was never sent: the copy ends at `length` again. */
  forget(length: number): void {
    this.ids.length = Math.min(this.ids.length, length);
    this.verified = Math.min(this.verified, this.ids.length);
  }

  /**
   * A conditional step, sent while the step before it is in flight: from the end of what was sent (where
   * that step's reply goes) to the end of `request.context`. The copy takes its ids in only when it is
   * answered (`answeredConditional`). FAILED_PRECONDITION when the context does not extend what was sent.
   */
  conditionalStep(request: CloudStepRequest): RouteRequest {
    const offset = this.ids.length;
    if (request.context.length <= offset || this.ids.some((id, i) => request.context[i] !== id)) {
      throw new AppError('FAILED_PRECONDITION', 'a conditional step must extend the context of the step in flight by the token it assumes');
    }
    const ids = request.context.slice(offset);
    return { step: { ...stepMessage(request, offset, ids, toWireSources(request.sources.slice(offset))), conditional: true, ...this.samplingChange(request) } };
  }

  /** Takes in the tokens the shim returned for a step; false when its context length then disagrees with the copy. */
  answered(result: StepResult__Output): boolean {
    this.ids.push(...result.ids);
    return result.contextLength === this.ids.length;
  }

  /**
   * Takes in a conditional step that was not skipped: its ids are the edge's (the shim checked them against
   * the reply it assumed), then the tokens it returned. False when the shim's context length disagrees.
   */
  answeredConditional(request: CloudStepRequest, result: StepResult__Output): boolean {
    this.ids.push(...request.context.slice(this.ids.length));
    this.verified = this.ids.length;
    return this.answered(result);
  }

  /** Whether the edge's context still starts with what the shim holds (only new entries are compared). */
  matches(context: readonly number[]): boolean {
    if (context.length < this.ids.length) return false;
    for (let i = this.verified; i < this.ids.length; i++) if (context[i] !== this.ids[i]) return false;
    this.verified = this.ids.length;
    return true;
  }

  /** The stream is gone: the shim holds nothing of this conversation. */
  reset(): void {
    this.ids = [];
    this.verified = 0;
  }

  /** `{ sampling }` when the request's settings differ from the shim's (which then become them), else nothing. */
  private samplingChange(request: CloudStepRequest): { sampling?: Sampling } {
    const sampling = wireSampling(request);
    const key = JSON.stringify(sampling);
    if (key === this.samplingKey) return {};
    this.samplingKey = key;
    return { sampling };
  }
}

/**
 * INVALID_ARGUMENT unless every id of the context has its source (the loop's bug, not the cloud's).
 *
 * @example
 * checkSources({ ...request, context: [1, 403], sources: ['prompt'] }); // throws
 */
export function checkSources(request: CloudStepRequest): void {
  if (request.sources.length !== request.context.length) {
    throw new AppError('INVALID_ARGUMENT', `context has ${request.context.length} ids but ${request.sources.length} sources`);
  }
}

/**
 * A step's sampling settings as the wire carries them. The seed is a uint32 on the wire; top_p 0 is sent
 * as is (the shim reads it as 1, no nucleus).
 *
 * @example
 * wireSampling(request); // { temperature: 0, topP: 1, seed: 7, stopTokenIds: [2], topLogprobs: 0 }
 */
export function wireSampling(request: CloudStepRequest): Sampling {
  return {
    temperature: request.temperature,
    topP: request.topP,
    ...(request.seed !== undefined ? { seed: request.seed >>> 0 } : {}),
    stopTokenIds: [...request.stopTokenIds],
    topLogprobs: request.topLogprobs,
  };
}

/**
 * The step message the client sends for `request` when the shim holds the context up to `offset`.
 *
 * @example
 * stepMessage(request, 12, [407], ['TOKEN_SOURCE_SLM']); // { offset: 12, ids: [407], sources: [...], tokenIndex, ... }
 */
export function stepMessage(request: CloudStepRequest, offset: number, ids: number[], sources: ReturnType<typeof toWireSources>): RouteStep {
  return {
    offset,
    ids,
    sources,
    tokenIndex: request.tokenIndex,
    maxTokens: request.maxTokens,
    routerScore: request.routerScore,
    threshold: request.threshold,
    ...(request.hiddenState ? { slmHiddenState: Array.from(request.hiddenState) } : {}),
  };
}

/**
 * A step result from the wire as the decoding loop reads it: an overloaded one is a reply without tokens
 * that says so, and the shim's load comes with every reply of a shim that reports it.
 *
 * @example
 * toReply(response.step!).tokens; // the ids the cloud generated
 */
export function toReply(result: StepResult__Output): CloudStepReply {
  return {
    tokens: result.ids,
    text: result.text,
    logprobs: result.logprobs,
    topAlternatives: result.top.map((alts) => alts.ids.map((id, i) => ({ id, logprob: alts.logprobs[i] ?? Number.NaN }))),
    cachedTokens: result.cachedTokens,
    backendMs: result.backendMs,
    shimMs: result.shimMs,
    ...(result.overloaded ? { overloaded: true } : {}),
    ...loadOf(result),
  };
}

/**
 * `{ load }` from a step result that carries the shim's load, else nothing (a shim older than the field).
 *
 * @example
 * loadOf(result); // { load: { stepsInFlight: 1, stepsQueued: 0, backendMs: 4.5 } }
 */
export function loadOf(result: StepResult__Output): { load?: CloudLoad } {
  if (!result.load) return {};
  const { stepsInFlight, stepsQueued, backendMs } = result.load;
  return { load: { stepsInFlight, stepsQueued, backendMs } };
}
