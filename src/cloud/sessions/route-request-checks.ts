/**
 * What the shim checks in a Route stream's requests before it keeps or computes anything, and in the ids its
 * backend returns. Each check throws an AppError whose code says whose fault it is: INVALID_ARGUMENT for what
 * the edge sent, INTERNAL for what the shim's own backend returned, OUT_OF_RANGE past the model's window.
 *
 * @example
 * checkIds([1, 512], 512, 'edge', 'context_ids holds'); // INVALID_ARGUMENT: context_ids holds token id 512 (index 1), outside the vocabulary [0, 512)
 * checkIds([9999], 512, 'backend', 'the backend returned'); // INTERNAL
 */
import { AppError } from '../../shared/errors.ts';
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import type { ContextExtend__Output, OpenSession__Output, RouteStep__Output, Sampling__Output } from '../../shared/grpc/proto.ts';
import { fromWireSources } from '../../shared/grpc/wire.ts';
import type { BackendInfo, SamplingSettings } from '../backends/backend.ts';
import type { ShimConfig } from '../config.ts';
import { sessionRoutingKey } from './session-routing-key.ts';
import { QuotingError } from '../quoting-error.ts';
import { checkRequestId } from './request-id.ts';
import { checkContext, checkRoomToGenerate } from '../backends/context-window.ts';

/** Who produced the ids a check reads. */
export type IdsFrom = 'edge' | 'backend';

/** An id outside the vocabulary is the request's fault when the edge sent it, the shim's when its backend returned it. */
const OUT_OF_VOCABULARY: Readonly<Record<IdsFrom, AppError['code']>> = { edge: 'INVALID_ARGUMENT', backend: 'INTERNAL' };

export function checkIds(ids: readonly number[], vocabSize: number | undefined, from: IdsFrom, what: string): void {
  if (vocabSize === undefined) return;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i]! >= vocabSize) {
      const outside = `outside the vocabulary [0, ${vocabSize})`;
      throw new QuotingError(OUT_OF_VOCABULARY[from], `${what} token id ${ids[i]} (index ${i}), ${outside}`, `${what} a token id (index ${i}) ${outside}`);
    }
  }
}

/** The vocabulary and window the checks hold ids to: the backend's. */
type ModelLimits = Pick<BackendInfo, 'vocabSize' | 'maxContext'>;

/**
 * An `open` the shim can keep: its request id, routing key, context and sources (its sampling settings are
 * validateSampling's); returns the session's routing key.
 */
export function checkOpen(open: OpenSession__Output, model: ModelLimits): string {
  checkRequestId(open.requestId);
  const routingKey = sessionRoutingKey(open);
  if (open.contextIds.length === 0) throw new AppError('INVALID_ARGUMENT', 'open needs the context: at least one token id');
  if (open.contextSources.length !== 0 && open.contextSources.length !== open.contextIds.length) {
    throw new AppError('INVALID_ARGUMENT', `context_sources has ${open.contextSources.length} entries for ${open.contextIds.length} ids`);
  }
  checkIds(open.contextIds, model.vocabSize, 'edge', 'context_ids holds');
  checkContext(open.contextIds.length, model.maxContext);
  return routingKey;
}

/**
 * A step the shim can append to a context of `contextLength` tokens (a conditional step's overlap counted
 * once) and still generate after; returns the span to ask for and the step's sources.
 */
export function checkStep(
  step: RouteStep__Output,
  contextLength: number,
  config: Readonly<ShimConfig>,
  model: ModelLimits,
): { maxTokens: number; sources: TokenSource[] } {
  if (step.sources.length !== step.ids.length) {
    throw new AppError('INVALID_ARGUMENT', `a step has ${step.ids.length} ids but ${step.sources.length} sources`);
  }
  // Only recorded by the shim, but a step that claims a threshold outside [0, 1] comes from a broken edge.
  if (!(step.threshold >= 0 && step.threshold <= 1)) throw new AppError('INVALID_ARGUMENT', `threshold must be in [0, 1], got ${step.threshold}`);
  if (!Number.isFinite(step.routerScore)) throw new AppError('INVALID_ARGUMENT', `router_score must be a finite number, got ${step.routerScore}`);
  const maxTokens = step.maxTokens || 1;
  if (maxTokens > config.maxSpanTokens) throw new AppError('INVALID_ARGUMENT', `max_tokens ${maxTokens} is above this shim's limit of ${config.maxSpanTokens}`);
  checkIds(step.ids, model.vocabSize, 'edge', 'the step holds');
  checkRoomToGenerate((step.conditional ? Math.min(step.offset, contextLength) : contextLength) + step.ids.length, model.maxContext);
  const sources = generatedSources(step.sources);
  return { maxTokens, sources };
}

/**
 * An `extend` the shim can append to a context of `contextLength` tokens and still generate after; returns
 * its sources. An empty one is an edge that lost track of what it sent.
 */
export function checkExtend(extend: ContextExtend__Output, contextLength: number, model: ModelLimits): TokenSource[] {
  if (extend.ids.length === 0) throw new AppError('INVALID_ARGUMENT', 'an extend needs at least one token id');
  if (extend.sources.length !== extend.ids.length) {
    throw new AppError('INVALID_ARGUMENT', `an extend has ${extend.ids.length} ids but ${extend.sources.length} sources`);
  }
  checkIds(extend.ids, model.vocabSize, 'edge', 'the extend holds');
  checkRoomToGenerate(contextLength + extend.ids.length, model.maxContext);
  return generatedSources(extend.sources);
}

/**
 * A delta's sources (a step's, an extend's). A delta appends what was generated since the last one; the
 * prompt came with `open` (a reopened session sends its whole history there), so a prompt token here is an
 * edge that lost track of its context.
 */
function generatedSources(wire: RouteStep__Output['sources']): TokenSource[] {
  const sources = fromWireSources(wire, 'sources');
  const prompt = sources.indexOf('prompt');
  if (prompt >= 0) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `sources[${prompt}] is TOKEN_SOURCE_PROMPT: a step or extend carries generated tokens only (slm, llm, fallback); prompt tokens belong in open.context_ids`,
    );
  }
  return sources;
}

export function validateSampling(sampling: Sampling__Output | null, config: Readonly<ShimConfig>, vocabSize: number | undefined): SamplingSettings {
  const s = sampling ?? { temperature: 0, topP: 0, stopTokenIds: [], topLogprobs: 0 };
  if (!Number.isFinite(s.temperature) || s.temperature < 0) throw new AppError('INVALID_ARGUMENT', `temperature must be ≥ 0, got ${s.temperature}`);
  if (!Number.isFinite(s.topP) || s.topP < 0 || s.topP > 1) throw new AppError('INVALID_ARGUMENT', `top_p must be in (0, 1], got ${s.topP}`);
  if (s.topLogprobs > config.maxTopLogprobs) {
    throw new AppError('INVALID_ARGUMENT', `top_logprobs ${s.topLogprobs} is above this shim's limit of ${config.maxTopLogprobs}`);
  }
  // An id the model can never produce would never stop a span: the edge meant another vocabulary.
  checkIds(s.stopTokenIds, vocabSize, 'edge', 'stop_token_ids holds');
  return Object.freeze({
    temperature: s.temperature,
    topP: s.topP === 0 ? 1 : s.topP,
    seed: s.seed,
    stopTokenIds: Object.freeze([...s.stopTokenIds]),
    topLogprobs: s.topLogprobs,
  });
}
