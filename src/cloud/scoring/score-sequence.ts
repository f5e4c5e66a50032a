/**
 * The shim's Score call without its transport: checks a teacher-forcing request against the backend (ids in
 * its vocabulary, a sequence within its window, one candidate per position, a bounded top-k, a bounded
 * request id), waits for one of a few scoring slots, and asks the backend under the shim's backend deadline.
 *
 * Scoring is the tools' batch work (router training, evaluation) and a routed step is a generation waiting:
 * the backend runs the call in turns of the step admission's batch lane (step-admission.ts), which routed
 * steps always go ahead of and which never takes a step's last slot. The embedded backend takes one turn per
 * chunk of its forward passes, so a step waits behind one chunk at most, never behind a whole window; the
 * turns stay out of the step time the admission predicts from.
 *
 * @example
 * const scores = new FifoSlots(2);
 * const reply = await scoreSequence({ ids: [1, 403, 9], candidateIds: [403, 12], topK: 1, vocabLimit: 0, requestId: 'r1' }, ctx, scores, signal);
 * reply.positions[1].candidateLogprob; // log p(12 | 1 403)
 */
import { AppError } from '../../shared/errors.ts';
import type { FifoSlots } from '../../shared/process/fifo-slots.ts';
import type { ScoreRequest__Output, ScoreResponse } from '../../shared/grpc/proto.ts';
import type { BackendInfo } from '../backends/backend.ts';
import { checkRequestId } from '../sessions/request-id.ts';
import type { ShimContext } from '../sessions/route-session.ts';

/** The most alternatives per position a call may ask for (SGLang's and OpenAI's APIs allow 20). */
export const MAX_SCORE_TOP_K = 20;

/** The longest sequence a Score call may hold: what ScoreResponse.max_context tells the tools to window by. */
function scoreWindow(info: BackendInfo): number | undefined {
  return info.maxScoreTokens ?? info.maxContext;
}

type ScoreContext = Pick<ShimContext, 'backend' | 'config' | 'log' | 'vocabularySha256' | 'admission'>;

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

function checkRequest(request: ScoreRequest__Output, ctx: ScoreContext): void {
  const { ids, candidateIds, topK } = request;
  const { vocabSize } = ctx.backend.info;
  const maxContext = scoreWindow(ctx.backend.info);
  checkRequestId(request.requestId);
  if (ids.length < 2) invalid(`a sequence to score needs 2 ids or more (one position predicting the next), got ${ids.length}`);
  if (maxContext !== undefined && ids.length > maxContext) {
    throw new AppError(
      'OUT_OF_RANGE',
      `the sequence is ${ids.length} tokens, above the cloud model's window of ${maxContext}: score it in windows of at most ${maxContext}`,
    );
  }
  if (candidateIds.length !== 0 && candidateIds.length !== ids.length - 1) {
    invalid(`candidate_ids must hold one id per position (${ids.length - 1}) or none, got ${candidateIds.length}`);
  }
  if (topK > MAX_SCORE_TOP_K) invalid(`top_k must be at most ${MAX_SCORE_TOP_K}, got ${topK}`);
  if (vocabSize === undefined) return;
  for (const [what, list] of [
    ['ids', ids],
    ['candidate_ids', candidateIds],
  ] as const) {
    const at = list.findIndex((id) => id >= vocabSize);
    if (at >= 0) invalid(`${what}[${at}] is ${list[at]}, outside the cloud model's vocabulary [0, ${vocabSize})`);
  }
}

export async function scoreSequence(request: ScoreRequest__Output, ctx: ScoreContext, slots: FifoSlots, signal: AbortSignal): Promise<ScoreResponse> {
  checkRequest(request, ctx);
  const { backend, config, log } = ctx;
  if (!backend.score) {
    throw new AppError('UNIMPLEMENTED', `this shim's backend (${backend.info.name}) cannot score a sequence: it has no way to read prompt log-probabilities`);
  }
  const score = backend.score.bind(backend);
  const started = performance.now();
  const release = await slots.acquire(signal);
  const deadline = AbortSignal.any([signal, AbortSignal.timeout(config.backendTimeoutMs)]);
  let result: Awaited<ReturnType<typeof score>>;
  try {
    result = await score({
      ids: request.ids,
      candidates: request.candidateIds.length > 0 ? request.candidateIds : undefined,
      topK: request.topK,
      vocabLimit: request.vocabLimit > 0 ? request.vocabLimit : undefined,
      requestId: request.requestId || `score-${crypto.randomUUID()}`,
      signal: deadline,
      turn: () => ctx.admission.acquireBatch(deadline),
    });
  } catch (e) {
    if (deadline.aborted && !signal.aborted)
      throw new AppError('DEADLINE_EXCEEDED', `the backend did not score ${request.ids.length} tokens within ${config.backendTimeoutMs} ms`);
    throw e;
  } finally {
    release();
  }
  if (result.positions.length !== request.ids.length - 1) {
    throw new AppError('INTERNAL', `the backend scored ${result.positions.length} positions of ${request.ids.length - 1}`);
  }
  log.debug('scored', {
    requestId: request.requestId,
    tokens: request.ids.length,
    topK: request.topK,
    exact: result.exact,
    ms: Math.round(performance.now() - started),
  });
  return {
    positions: result.positions,
    backend: backend.info.name,
    exact: result.exact,
    maxContext: scoreWindow(backend.info) ?? 0,
    backendMs: result.backendMs,
    vocabularySha256: ctx.vocabularySha256 ?? '',
  };
}
