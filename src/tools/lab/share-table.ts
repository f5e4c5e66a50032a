/**
 * Teacher forcing at fixed routed shares: each method routes exactly ⌊share · n⌋ positions (those it is
 * least sure of), and its accuracy is reported as the recovered fraction of the gap between the edge
 * model alone and the cloud model alone: (accuracy − edge) / (cloud − edge). The oracle routes the
 * positions only the cloud gets right first: the most any router can recover at that share.
 *
 * @example
 * atShare({ count: 4, edgeCorrect, cloudCorrect }, { router, random, top1, entropy }, [0.5]);
 */
import { lowestSelection, randomSelection } from '../lab/ratio-matching.ts';

export const DEFAULT_SHARES = [0.1, 0.2, 0.3, 0.5] as const;

export interface ShareRow {
  share: number;
  /** Positions routed (the same for every method). */
  routed: number;
  router: number;
  random: number;
  top1: number;
  entropy: number;
  oracle: number;
  /** The accuracies the fractions are relative to. */
  small_only_accuracy: number;
  large_only_accuracy: number;
}

interface Outcomes {
  count: number;
  edgeCorrect: ArrayLike<number>;
  cloudCorrect: ArrayLike<number>;
}

function accuracy(o: Outcomes, routed: Uint8Array): number {
  let right = 0;
  for (let i = 0; i < o.count; i++) right += routed[i] ? o.cloudCorrect[i]! : o.edgeCorrect[i]!;
  return o.count ? right / o.count : NaN;
}

/** Scores per method, low = route first (the entropy baseline passes 1 / (1 + H)). */
export interface MethodScores {
  router: ArrayLike<number>;
  top1: ArrayLike<number>;
  entropy: ArrayLike<number>;
}

export function atShare(o: Outcomes, scores: MethodScores, shares: readonly number[] = DEFAULT_SHARES, seed = 0): ShareRow[] {
  const n = o.count;
  let edgeRight = 0;
  let cloudRight = 0;
  let fixable = 0;
  for (let i = 0; i < n; i++) {
    edgeRight += o.edgeCorrect[i]!;
    cloudRight += o.cloudCorrect[i]!;
    if (!o.edgeCorrect[i] && o.cloudCorrect[i]) fixable++;
  }
  const gap = (cloudRight - edgeRight) / n;
  const recovered = (acc: number) => (gap !== 0 ? (acc - edgeRight / n) / gap : NaN);
  return shares.map((share) => {
    const k = Math.floor(share * n);
    return {
      share,
      routed: k,
      router: recovered(accuracy(o, lowestSelection(scores.router, k).mask)),
      random: recovered(accuracy(o, randomSelection(n, k, seed))),
      top1: recovered(accuracy(o, lowestSelection(scores.top1, k).mask)),
      entropy: recovered(accuracy(o, lowestSelection(scores.entropy, k).mask)),
      // Routing a position both get right (or wrong) changes nothing, so the oracle gains min(k, fixable).
      oracle: recovered((edgeRight + Math.min(k, fixable)) / n),
      small_only_accuracy: edgeRight / n,
      large_only_accuracy: cloudRight / n,
    };
  });
}
