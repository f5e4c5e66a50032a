/** Figures for a binary scorer: AUC (Mann–Whitney), accuracy at a cut-off, label balance, log loss. */

/**
 * Area under the ROC curve via the Mann–Whitney U statistic: the probability that a random positive
 * (label 1) scores above a random negative, ties counting one half (mid-ranks). NaN when one class is absent.
 *
 * @example
 * auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]); // 0.75
 */
export function auc(scores: ArrayLike<number>, labels: ArrayLike<number>): number {
  const n = scores.length;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[a]! - scores[b]!);
  let positives = 0;
  let positiveRankSum = 0;
  for (let start = 0; start < n; ) {
    let end = start;
    while (end + 1 < n && scores[order[end + 1]!] === scores[order[start]!]) end++;
    const midRank = (start + end) / 2 + 1; // ranks are 1-based
    for (let k = start; k <= end; k++) {
      if (labels[order[k]!] === 1) {
        positives++;
        positiveRankSum += midRank;
      }
    }
    start = end + 1;
  }
  const negatives = n - positives;
  if (positives === 0 || negatives === 0) return NaN;
  return (positiveRankSum - (positives * (positives + 1)) / 2) / (positives * negatives);
}

/** Share of rows where `score >= cutoff` agrees with label 1. */
export function accuracyAt(scores: ArrayLike<number>, labels: ArrayLike<number>, cutoff = 0.5): number {
  let right = 0;
  for (let i = 0; i < scores.length; i++) if ((scores[i]! >= cutoff ? 1 : 0) === labels[i]) right++;
  return scores.length ? right / scores.length : NaN;
}

/** Share of label 1. */
export function labelBalance(labels: ArrayLike<number>): number {
  let ones = 0;
  for (let i = 0; i < labels.length; i++) ones += labels[i]!;
  return labels.length ? ones / labels.length : NaN;
}

/**
 * Mean binary cross-entropy of probabilities against labels or soft targets in [0, 1] (clamped away from 0 and
 * 1); with `weights`, each row's term weighted and the sum divided by the weights' sum.
 */
export function logLoss(probabilities: ArrayLike<number>, labels: ArrayLike<number>, weights?: ArrayLike<number>): number {
  let sum = 0;
  let total = 0;
  for (let i = 0; i < probabilities.length; i++) {
    const p = Math.min(1 - 1e-7, Math.max(1e-7, probabilities[i]!));
    const y = labels[i]!;
    const w = weights ? weights[i]! : 1;
    sum -= w * (y * Math.log(p) + (1 - y) * Math.log(1 - p));
    total += w;
  }
  return total > 0 ? sum / total : NaN;
}
