/**
 * Baselines at an equal routed ratio. Over fixed positions (teacher forcing) the match is exact: route
 * the same number of positions, chosen at random or by lowest top-1 probability. Along generated text
 * the positions depend on what was routed, so a baseline's threshold is searched for (from a first guess,
 * interpolating between the runs on either side) until its own runs route the share closest to the target.
 * The evaluation matches its baselines with these; router training sets its rollout and default thresholds
 * by `quantileThreshold`.
 *
 * @example
 * const threshold = quantileThreshold(scores, 0.3); // about 30% of `scores` fall below it
 */
import { seededRandom } from '../../shared/seeded-random.ts';

/** `k` of `n` positions picked at random (a seeded shuffle; smaller k give subsets of larger ones). */
export function randomSelection(n: number, k: number, seed: number): Uint8Array {
  const order = Array.from({ length: n }, (_, i) => i);
  const random = seededRandom(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const mask = new Uint8Array(n);
  for (let i = 0; i < k; i++) mask[order[i]!] = 1;
  return mask;
}

/**
 * The `k` positions with the lowest scores (ties: earlier positions first), and a threshold that
 * separates them from the rest: halfway between the k-th and the (k+1)-th lowest score.
 */
export function lowestSelection(scores: ArrayLike<number>, k: number): { mask: Uint8Array; threshold: number } {
  const n = scores.length;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[a]! - scores[b]! || a - b);
  const mask = new Uint8Array(n);
  for (let i = 0; i < k; i++) mask[order[i]!] = 1;
  const threshold = k === 0 ? 0 : k === n ? 1 : (scores[order[k - 1]!]! + scores[order[k]!]!) / 2;
  return { mask, threshold };
}

/** A threshold below which a share `ratio` of `values` lies: a first guess for `matchRoutedRatio`. */
export function quantileThreshold(values: readonly number[], ratio: number): number {
  if (values.length === 0) return ratio;
  return lowestSelection(values, Math.round(ratio * values.length)).threshold;
}

export interface Calibrated<R> {
  threshold: number;
  result: R;
  /** Runs the search made (the returned one among them). */
  runs: number;
}

/**
 * Searches the threshold in [0, 1] whose run routes the share closest to `target`, assuming the share
 * grows with the threshold (0 at τ = 0 and 1 at τ = 1 for scores in [0, 1)). Each next threshold is
 * interpolated between the closest runs on either side of the target (regula falsi, Illinois variant):
 * halving the bracket threw a close first guess far away, and every run is a whole generation. Stops
 * within `tolerance` or after `maxRuns` runs; returns the closest run seen.
 */
export async function matchRoutedRatio<R extends { routedRatio: number }>(
  run: (threshold: number) => Promise<R>,
  target: number,
  options: { guess: number; maxRuns: number; tolerance: number; below?: { threshold: number; routedRatio: number } },
): Promise<Calibrated<R>> {
  if (target <= 0) return { threshold: 0, result: await run(0), runs: 1 };
  if (target >= 1) return { threshold: 1, result: await run(1), runs: 1 };
  // The bracket's ends, each with its share's distance to the target (f < 0 routed too little, f > 0 too much).
  // A run already made below the target (`below`: the share before's) is the lower end from the start.
  const below = options.below && options.below.routedRatio < target ? options.below : undefined;
  let lo = below ? { tau: below.threshold, f: below.routedRatio - target } : { tau: 0, f: -target };
  let hi = { tau: 1, f: 1 - target };
  let retained: 'lo' | 'hi' | undefined;
  let threshold = options.guess > lo.tau && options.guess < 1 ? options.guess : (lo.tau + 1) / 2;
  let best: { threshold: number; result: R } | undefined;
  let runs = 0;
  while (runs < Math.max(1, options.maxRuns)) {
    const result = await run(threshold);
    runs++;
    const f = result.routedRatio - target;
    if (!best || Math.abs(f) < Math.abs(best.result.routedRatio - target)) best = { threshold, result };
    if (Math.abs(f) <= options.tolerance) break;
    // Illinois: an end kept twice in a row counts half, so that a curved share cannot pin the search to it.
    if (f < 0) {
      lo = { tau: threshold, f };
      if (retained === 'hi') hi.f /= 2;
      retained = 'hi';
    } else {
      hi = { tau: threshold, f };
      if (retained === 'lo') lo.f /= 2;
      retained = 'lo';
    }
    const interpolated = (lo.tau * hi.f - hi.tau * lo.f) / (hi.f - lo.f);
    threshold = interpolated > lo.tau && interpolated < hi.tau ? interpolated : (lo.tau + hi.tau) / 2;
  }
  return { ...best!, runs };
}
