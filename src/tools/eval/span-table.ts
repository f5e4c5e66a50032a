/**
 * Route spans under teacher forcing: at a high round trip, do longer spans at fewer positions keep the
 * quality of the same number of cloud tokens for fewer round trips? A position whose router score is below
 * τ routes, and so do the `span − 1` positions after it in its document (the cloud answers them in the same
 * round trip; the router does not score them, as in the decoding loop). τ is searched for so that the cloud
 * tokens come as close as possible to the target share; each method is then the recovered fraction of the
 * edge→cloud gap (share-table.ts) and its round trips per 100 tokens.
 *
 * Teacher forcing reads the cloud's prediction of each span token from the true prefix; in a generation
 * it follows the cloud's own earlier tokens, which the edge would have to accept as they come.
 *
 * @example
 * spanRows(outcomes, scores, [0.1], [1, 2, 4]); // one row per share and span
 */
import { recoveredFraction, type BudgetOutcomes } from './share-budget-table.ts';

export const DEFAULT_SPANS = [1, 2, 4] as const;

export interface SpanRow {
  /** Target share of cloud tokens, and the one reached. */
  share: number;
  span: number;
  tau: number;
  cloud_share: number;
  /** Routed steps (round trips) per 100 positions. */
  round_trips_per_100: number;
  recovered: number;
}

/** Positions answered by the cloud when every score below `tau` routes a span (not crossing a document). */
export function spanRouting(scores: ArrayLike<number>, paragraph: ArrayLike<number>, tau: number, span: number): { routed: Uint8Array; steps: number } {
  const routed = new Uint8Array(scores.length);
  let steps = 0;
  for (let i = 0; i < scores.length; ) {
    if (!(scores[i]! < tau)) {
      i++;
      continue;
    }
    steps++;
    const doc = paragraph[i];
    for (let j = 0; j < span && i < scores.length && paragraph[i] === doc; j++) routed[i++] = 1;
  }
  return { routed, steps };
}

const count = (mask: Uint8Array) => mask.reduce((a, b) => a + b, 0);

/** The τ among the scores (cut just above one of them) whose spans route the count of cloud tokens closest to `target`. */
function matchSpanTau(scores: ArrayLike<number>, paragraph: ArrayLike<number>, span: number, target: number): number {
  const sorted = [...new Set(Array.from(scores))].sort((a, b) => a - b);
  // Cut k routes scores below sorted[k] (k = sorted.length: every score). Cloud tokens grow with k, up to the
  // spans that later positions lose to an earlier span; bisection finds the first k at or above the target.
  const tauAt = (k: number) => (k < sorted.length ? sorted[k]! : Number.POSITIVE_INFINITY);
  const tokensAt = (k: number) => count(spanRouting(scores, paragraph, tauAt(k), span).routed);
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tokensAt(mid) < target) lo = mid + 1;
    else hi = mid;
  }
  const below = lo > 0 ? lo - 1 : lo;
  return Math.abs(tokensAt(below) - target) < Math.abs(tokensAt(lo) - target) ? tauAt(below) : tauAt(lo);
}

/** One row per share and span, in that order. */
export function spanRows(o: BudgetOutcomes, scores: ArrayLike<number>, shares: readonly number[], spans: readonly number[] = DEFAULT_SPANS): SpanRow[] {
  const n = o.count;
  return shares.flatMap((share) =>
    spans.map((span) => {
      const tau = matchSpanTau(scores, o.paragraph, span, share * n);
      const { routed, steps } = spanRouting(scores, o.paragraph, tau, span);
      return {
        share,
        span,
        tau: Number.isFinite(tau) ? tau : 1,
        cloud_share: n ? count(routed) / n : 0,
        round_trips_per_100: n ? (100 * steps) / n : 0,
        recovered: recoveredFraction(o, routed),
      };
    }),
  );
}
