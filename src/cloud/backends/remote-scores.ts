/**
 * Teacher forcing's figures as an HTTP server reports them (SGLang's prompt log-probabilities, vLLM's
 * `prompt_logprobs`, an OpenAI echo), turned into the contract's PositionScores the way the embedded
 * backend's `scoreRows` makes them: the top-k most likely first, ids at or above `vocabLimit` left out of it,
 * every log-probability rounded to float32.
 *
 * A candidate's figure is the model's own where the server returned it: asked for by id (SGLang's
 * `token_ids_logprob`), the actual next id, or one of the alternatives. Otherwise the candidate is outside
 * the server's top-k, so its log-probability is at most the smallest of them: that bound is what goes out,
 * and the call is not exact (see the proto's ScoreResponse).
 *
 * @example
 * const asked = alternativesToAsk(request);
 * const { positions, exact } = assembleScores(reported, request, asked, 'keys are text');
 */
import { AppError } from '../../shared/errors.ts';
import type { TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import type { PositionScores } from '../../shared/model/position-scores.ts';
import type { BackendScoreRequest } from './backend.ts';

/** One position i (reading ids[0..i], predicting ids[i+1]) as the server reported it. */
export interface ReportedPosition {
  /** log p(ids[i+1] | ids[0..i]). */
  nextLogprob: number;
  /** Alternatives the server named by id: its top-k, in any order, maybe with the actual next id too (vLLM's k+1). */
  alternatives: TokenAlternative[];
  /** Log-probabilities of alternatives whose id is unknown (text keys that name no single id). */
  unnamed?: number[];
  /** The candidate's own log-probability, where the server computed it by id. */
  candidateLogprob?: number;
}

/**
 * Alternatives per position to ask the server for: the caller's top-k, and at least one where a candidate
 * may have to be bounded by them (a bound needs a smallest top-k figure to exist).
 */
export function alternativesToAsk(request: Pick<BackendScoreRequest, 'topK' | 'candidates'>): number {
  return Math.max(request.topK, request.candidates ? 1 : 0);
}

/**
 * `asked`: how many alternatives the server was asked for (its list beyond them is the actual next id);
 * `whyUnnamed`: why some alternatives have no id, for the error when the top-k would need one.
 */
export function assembleScores(
  reported: readonly ReportedPosition[],
  request: Pick<BackendScoreRequest, 'ids' | 'candidates' | 'topK' | 'vocabLimit'>,
  asked: number,
  whyUnnamed = '',
): { positions: PositionScores[]; exact: boolean } {
  const { ids, candidates, topK, vocabLimit } = request;
  let exact = true;
  const positions = reported.map((at, i): PositionScores => {
    const named = at.alternatives.map((a) => ({ id: a.id as number | undefined, logprob: a.logprob }));
    const all = [...named, ...(at.unnamed ?? []).map((logprob) => ({ id: undefined, logprob }))];
    // The server's own top-`asked`; what lies beyond them is the actual next id (vLLM adds it).
    const serverTop = all.sort((a, b) => b.logprob - a.logprob).slice(0, asked);
    const top = serverTop.filter((a) => a.id === undefined || vocabLimit === undefined || a.id < vocabLimit).slice(0, topK);
    if (top.some((a) => a.id === undefined)) {
      throw new AppError('FAILED_PRECONDITION', `the server named some of its top ${topK} alternatives at position ${i} by text only, ${whyUnnamed}`);
    }
    let candidateLogprob = 0;
    const candidate = candidates?.[i];
    if (candidate !== undefined) {
      const own = at.candidateLogprob ?? (candidate === ids[i + 1] ? at.nextLogprob : at.alternatives.find((a) => a.id === candidate)?.logprob);
      if (own !== undefined) candidateLogprob = own;
      else {
        exact = false;
        candidateLogprob = upperBound(
          serverTop.map((a) => a.logprob),
          at.unnamed ?? [],
        );
      }
    }
    return {
      nextLogprob: Math.fround(at.nextLogprob),
      candidateLogprob: Math.fround(candidateLogprob),
      topIds: top.map((a) => a.id!),
      topLogprobs: top.map((a) => Math.fround(a.logprob)),
    };
  });
  return { positions, exact };
}

/**
 * A candidate the server did not name is outside its top-k, or one of the alternatives it could not name:
 * either way its log-probability is at most the larger of the smallest top-k figure and the largest unnamed
 * one. With no alternatives at all, 0 (probability 1) is the only bound there is.
 */
function upperBound(serverTop: readonly number[], unnamed: readonly number[]): number {
  if (serverTop.length === 0) return 0;
  return Math.max(Math.min(...serverTop), ...unnamed);
}

/**
 * An HTTP backend's Score window: its context less one. SGLang refuses a prompt as long as its context and
 * vLLM counts at least one generated token against it, even when none is asked for.
 */
export function roomForOneToken(maxContext: number | undefined): { maxScoreTokens?: number } {
  return maxContext === undefined ? {} : { maxScoreTokens: maxContext - 1 };
}
