/**
 * The held-out report's free-running comparison at the same routed share: the trained router's run is
 * searched again towards the share top-1's run reached (held-out-report.ts), with the runs it has already
 * made bracketing each next threshold.
 *
 * @example
 * nextThreshold([{ tau: 0.4, share: 0.1 }, { tau: 0.6, share: 0.3 }], 0.2); // 0.5
 */
import { freeRunningFigures } from '../lab/free-running-metrics.ts';
import { GenerationRuns, type MeasuredRun } from '../lab/generation-settings.ts';

/** Routed-share difference that ends a threshold search early: a few tokens of a report's generations. */
export const SHARE_TOLERANCE = 0.01;

/** One router's free-running run at a share. */
export interface FreeRun {
  tau: number;
  routed_share: number;
  ppl_cloud: number;
  /** The cloud's perplexity of the tokens outside repeated 4-grams (a repeating output's perplexity is lower for it). */
  ppl_cloud_fresh: number;
  rep4: number;
  stuck: number;
  /** Outputs that differ from each other, of the report's prompts (absent in reports written before it was counted). */
  distinct_outputs?: number;
}

export function measuredFreeRun(tau: number, run: MeasuredRun): FreeRun {
  const figures = freeRunningFigures(run.items.map((i) => i.ids));
  return {
    tau,
    routed_share: run.routedRatio,
    ppl_cloud: run.perplexity,
    ppl_cloud_fresh: run.freshPerplexity,
    rep4: figures.rep4,
    stuck: figures.stuck,
    distinct_outputs: figures.distinct,
  };
}

/**
 * The next threshold to try for a routed `target` share, from the runs made so far: between the highest τ
 * that routed less and the lowest τ above it that routed more (0 and 1 where none has), interpolated by
 * share, or halfway where that τ was run already; undefined where both were.
 */
export function nextThreshold(seen: readonly { tau: number; share: number }[], target: number): number | undefined {
  const below = seen.filter((k) => k.share < target).sort((x, y) => y.tau - x.tau)[0] ?? { tau: 0, share: 0 };
  const above = seen.filter((k) => k.share > target && k.tau > below.tau).sort((x, y) => x.tau - y.tau)[0] ?? { tau: 1, share: 1 };
  const span = above.share - below.share;
  const tried = (tau: number) => seen.some((k) => k.tau === tau);
  const interpolated = below.tau + ((target - below.share) / (span > 0 ? span : 1)) * (above.tau - below.tau);
  const tau = tried(interpolated) ? (below.tau + above.tau) / 2 : interpolated;
  return tried(tau) || !(tau > 0 && tau < 1) ? undefined : tau;
}

/** Generation runs that keep every threshold the trained router was run at, for the search below. */
export class RouterRuns extends GenerationRuns {
  readonly routerThresholds = new Set<number>();

  override run(method: Parameters<GenerationRuns['run']>[0], threshold: number): Promise<MeasuredRun> {
    if (method === 'router') this.routerThresholds.add(threshold);
    return super.run(method, threshold);
  }
}

/**
 * The router's run at the share top-1's own runs reached. Each search stops within SHARE_TOLERANCE of the
 * nominal share or after its last run, so the two can end points apart, and routing more lowers perplexity
 * by itself: the verdict compares the router with top-1 at the same routed share. So where they ended
 * further apart than SHARE_TOLERANCE, the router's threshold is searched again towards top-1's share: each
 * step interpolates between the closest runs already made on either side of it (every run so far, cached,
 * not a fresh bisection of [0, 1], since along generated text the share jumps with τ), and the run closest
 * to top-1's share is the one reported.
 */
export async function pairedWithTop1(runs: RouterRuns, router: FreeRun, top1: FreeRun, calibrationRuns: number): Promise<FreeRun> {
  const target = top1.routed_share;
  if (Math.abs(router.routed_share - target) <= SHARE_TOLERANCE) return router;
  const known = async () => Promise.all([...runs.routerThresholds].map(async (tau) => ({ tau, run: await runs.run('router', tau) })));
  for (let step = 0; step < calibrationRuns; step++) {
    const seen = (await known()).map((k) => ({ tau: k.tau, share: k.run.routedRatio }));
    if (seen.some((k) => Math.abs(k.share - target) <= SHARE_TOLERANCE / 2)) break;
    const tau = nextThreshold(seen, target);
    if (tau === undefined) break;
    await runs.run('router', tau);
  }
  const closest = (await known()).sort((x, y) => Math.abs(x.run.routedRatio - target) - Math.abs(y.run.routedRatio - target))[0];
  if (!closest || !(Math.abs(closest.run.routedRatio - target) < Math.abs(router.routed_share - target))) return router;
  return measuredFreeRun(closest.tau, closest.run);
}
