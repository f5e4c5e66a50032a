/**
 * The held-out report's check for loops when its free-running runs are sampled: a small model decoding
 * greedily falls into repeating itself, and sampling at temperature 1 almost never does (every router's rep4
 * is then a few repeated tokens in thousands, whichever way it falls). So the repetition verdict reads greedy
 * generations: the trained router with its threshold searched until its greedy runs route the share (from
 * the sampled runs' threshold: greedy text is surer of itself, and the same τ routes less of it), against
 * random routing at the share that run reached.
 *
 * @example
 * const rows = await greedyLoopCheck(new GenerationRuns(edge, scorer, prompts, 48, routers), [{ share: 0.1, tau: 0.42 }], { maxRuns: 6, tolerance: 0.01 });
 * rows[0].router.rep4 > rows[0].random.rep4; // the router repeats itself more than random routing there
 */
import { freeRunningFigures } from '../lab/free-running-metrics.ts';
import type { GenerationRuns, MeasuredRun } from '../lab/generation-settings.ts';
import { matchRoutedRatio } from '../lab/ratio-matching.ts';

/** One greedy run of the check. */
export interface LoopRun {
  tau: number;
  routed_share: number;
  rep4: number;
  /** Outputs that end in a loop (free-running-metrics' stuck). */
  stuck: number;
}

export interface LoopCheckRow {
  share: number;
  router: LoopRun;
  random: LoopRun;
}

function loopRun(tau: number, run: MeasuredRun): LoopRun {
  const figures = freeRunningFigures(run.items.map((i) => i.ids));
  return { tau, routed_share: run.routedRatio, rep4: figures.rep4, stuck: figures.stuck };
}

/** `greedy` must decode greedily (GenerationRuns without sampling); `search` bounds each share's threshold search. */
export async function greedyLoopCheck(
  greedy: GenerationRuns,
  thresholds: readonly { share: number; tau: number }[],
  search: { maxRuns: number; tolerance: number },
): Promise<LoopCheckRow[]> {
  const rows: LoopCheckRow[] = [];
  for (const { share, tau } of thresholds) {
    const matched = await matchRoutedRatio((t) => greedy.run('router', t), share, { guess: tau, ...search });
    const router = loopRun(matched.threshold, matched.result);
    // The random router routes each token with probability τ: at τ = the share the router's run reached.
    const random = loopRun(router.routed_share, await greedy.run('random', router.routed_share));
    rows.push({ share, router, random });
  }
  return rows;
}
