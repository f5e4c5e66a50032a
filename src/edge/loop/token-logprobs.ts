/**
 * Log-probabilities of the emitted tokens, from the model that chose each: the edge model's own for its
 * tokens (computed here from the logits it drew from), the cloud's for routed tokens (its reply carries
 * them, and the top-k the step asked for). Values are the model's, before temperature and top-p, as vLLM
 * reports by default; a constraint's mask leaves out the alternatives it forbids, without renormalizing,
 * since the cloud's distribution over the allowed tokens never reaches the box. A token the privacy layer
 * put back in place of a placeholder has no figure of any model's: `logprob` null.
 *
 * @example
 * edgeLogprob(logits, id, 5, vocabSize);              // { logprob: -0.21, top: [{ id, logprob }, ...] }
 * cloudLogprobs([id], reply, 5, vocabSize); // the reply's own figures for the tokens it chose
 */
import type { TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import { logSumExp, topK } from '../../shared/model/logits.ts';
import { isVocabularyId } from '../../shared/model/vocabulary-id.ts';

export interface TokenLogprob {
  /** The chosen token's natural-log probability under the model that chose it; null where no model chose it. */
  logprob: number | null;
  /** The most likely tokens there, most likely first (as many as the request asked for, fewer where unknown). */
  top: TokenAlternative[];
}

/** Whether a token is allowed at the position (a constraint's mask); absent: every token is. */
export type AllowedToken = (id: number) => boolean;

/** The edge model's figures for `id` drawn from `logits`: ids past `vocabSize` (a padded model's rows) are no tokens. */
export function edgeLogprob(logits: Float32Array, id: number, topN: number, vocabSize: number, allowed?: AllowedToken): TokenLogprob {
  const logZ = logSumExp(logits);
  const top = topK(logits.subarray(0, Math.min(vocabSize, logits.length)), topN, (i, value) => value !== -Infinity && (!allowed || allowed(i)));
  return { logprob: logits[id]! - logZ, top: top.map((t) => ({ id: t.id, logprob: t.value - logZ })) };
}

/**
 * The cloud's figures for the tokens `chosen` at a routed step: the reply's own for the tokens it wrote, and
 * for a token the constraint took from the reply's top-k instead, that alternative's. `allowedAlternatives[i]`
 * are the step's alternatives at position i as the constraint lets them through.
 */
export function cloudLogprobs(
  chosen: readonly number[],
  reply: { tokens: readonly number[]; logprobs: readonly number[]; topAlternatives: readonly (readonly TokenAlternative[])[] },
  topN: number,
  vocabSize: number,
  allowedAlternatives: readonly (readonly TokenAlternative[])[] = reply.topAlternatives,
): TokenLogprob[] {
  return chosen.map((id, i) => {
    const alternatives = allowedAlternatives[i] ?? [];
    const own = reply.tokens[i] === id ? reply.logprobs[i] : (reply.topAlternatives[i] ?? []).find((a) => a.id === id)?.logprob;
    // NaN: a value's token put back by the privacy layer, or a figure the cloud did not give.
    const logprob = own === undefined || Number.isNaN(own) ? null : own;
    // A padded model's top-k may name rows past the tokenizer's ids: those are no tokens.
    const top = alternatives.filter((a) => isVocabularyId(a.id, vocabSize) && Number.isFinite(a.logprob)).sort((a, b) => b.logprob - a.logprob);
    return { logprob, top: top.slice(0, topN) };
  });
}
