/**
 * The held-out report's check for loops when its free-running runs are sampled: a small model decoding
 * greedily falls into repeating itself, and sampling at temperature 1 almost never does (every router's rep4
 * is then a few repeated tokens in thousands, whichever way it falls). So the repetition verdict reads greedy
 * generations: the trained router with its threshold searched until its greedy runs route the share (from
 * the sampled runs' threshold: greedy text is surer of itself, and the same τ routes less of it), against
 * random routing at the share that run reached.
 *
 * rep4 rests on the few outputs that fall into a loop, so the check reads more prompts than the sampled
 * runs (greedy runs are not scored by the cloud, and cost only their generation), and pools random routing
 * over LOOP_CHECK_RANDOM_STREAMS streams: one stream's rep4 moves by as much as the margins it is compared
 * with (docs/router-training.md).
 *
 * For the router's runs it also reads why they loop: both models are forced along each output, and of the
 * loop steps (the ids rep4 counts) it counts those where the edge's top-1 and the cloud's top-1 would both
 * have taken the step. There, keeping or routing the token made no difference: the loop was the pair's,
 * and only where the text went before it began could have kept it out.
 *
 * @example
 * const rows = await greedyLoopCheck({ edge, scorer, prompts, maxNewTokens: 48, router, random: (stream, prompt) => new RandomRouter(stream * 100_000 + prompt) }, [{ share: 0.1, tau: 0.42 }], { maxRuns: 6, tolerance: 0.01 });
 * rows[0].router.rep4 > rows[0].random.rep4; // the router repeats itself more than random routing there
 */
import type { Router } from '../../edge/routing/router.ts';
import { completesSeenNgram, repeatEnds } from '../../edge/routing/router-features.ts';
import type { CloudScorer } from '../lab/cloud-scorer.ts';
import { ForcedRecords } from '../lab/forced-records.ts';
import { freeRunningFigures } from '../lab/free-running-metrics.ts';
import { generateAll, type EvalEdge, type GenerationRun, type Prompt } from '../lab/generation-runs.ts';
import { GENERATION_LANES } from '../lab/generation-settings.ts';
import { matchRoutedRatio } from '../lab/ratio-matching.ts';

/** Random routing's streams the check pools (each a router per prompt, seeded apart). */
export const LOOP_CHECK_RANDOM_STREAMS = 2;

/** One greedy run of the check (random routing's: its streams pooled). */
export interface LoopRun {
  tau: number;
  routed_share: number;
  rep4: number;
  /** Outputs that end in a loop (free-running-metrics' stuck). */
  stuck: number;
  /** Outputs the figures pool: the prompts, times the streams for random routing (absent from older reports). */
  outputs?: number;
  /** The router's runs: ids that end a repeated 4-gram (rep4's), and of them those both models' top-1 would end. */
  loop_steps?: number;
  shared_loop_steps?: number;
}

export interface LoopCheckRow {
  share: number;
  router: LoopRun;
  random: LoopRun;
}

export interface LoopCheckInputs {
  edge: EvalEdge;
  /** Forces the router's outputs for the cloud's top-1 at each step. */
  scorer: CloudScorer;
  prompts: readonly Prompt[];
  maxNewTokens: number;
  router: Router;
  /** Random routing's router for a prompt in a stream: a stream of its own per (stream, prompt). */
  random: (stream: number, prompt: number) => Router;
}

function loopRun(tau: number, runs: readonly GenerationRun[]): LoopRun {
  const outputs = runs.flatMap((run) => run.items.map((i) => i.ids));
  const figures = freeRunningFigures(outputs);
  const tokens = runs.reduce((s, run) => s + run.tokens, 0);
  const routed = runs.reduce((s, run) => s + run.routed, 0);
  return { tau, routed_share: tokens ? routed / tokens : 0, rep4: figures.rep4, stuck: figures.stuck, outputs: outputs.length };
}

/**
 * Of `generated`'s loop steps (the ids ending a 4-gram seen earlier in it, as rep4 counts them), those where
 * both `edgeTop[t]` and `cloudTop[t]`, each model's top-1 for id t, would have ended a seen 4-gram too.
 */
export function sharedLoopSteps(generated: readonly number[], edgeTop: readonly number[], cloudTop: readonly number[]): { steps: number; shared: number } {
  const ends = repeatEnds(generated);
  let steps = 0;
  let shared = 0;
  for (let t = 0; t < generated.length; t++) {
    if (!ends[t]) continue;
    steps++;
    const before = generated.slice(0, t);
    if (completesSeenNgram(before, edgeTop[t]!, 4) && completesSeenNgram(before, cloudTop[t]!, 4)) shared++;
  }
  return { steps, shared };
}

/** Both models forced along each output of `run`: each generated id's two top-1s. */
async function loopAnatomy(o: LoopCheckInputs, run: GenerationRun): Promise<{ loop_steps: number; shared_loop_steps: number }> {
  const records = new ForcedRecords(o.edge.edgeModel, o.scorer);
  let steps = 0;
  let shared = 0;
  for (const item of run.items) {
    if (item.ids.length === 0) continue;
    // From the prompt's last position on: one row per generated id, the one that predicts it.
    const { rows } = await records.read([...item.promptIds, ...item.ids], { first: item.promptIds.length - 1 });
    const counted = sharedLoopSteps(
      item.ids,
      rows.map((r) => r.proposed),
      rows.map((r) => r.cloudTop),
    );
    steps += counted.steps;
    shared += counted.shared;
  }
  return { loop_steps: steps, shared_loop_steps: shared };
}

export async function greedyLoopCheck(
  o: LoopCheckInputs,
  thresholds: readonly { share: number; tau: number }[],
  search: { maxRuns: number; tolerance: number },
): Promise<LoopCheckRow[]> {
  const greedy = (router: Router | ((prompt: number) => Router), tau: number) =>
    generateAll(o.edge, router, o.prompts, { threshold: tau, maxNewTokens: o.maxNewTokens, lanes: GENERATION_LANES });
  const rows: LoopCheckRow[] = [];
  // The share before's greedy run, and how far its threshold moved from that share's sampled τ.
  let before: { threshold: number; routedRatio: number; shift: number } | undefined;
  for (const { share, tau } of thresholds) {
    // From the sampled τ moved by what the share before needed (greedy text routes less at one τ, by about
    // as much at each share), with that share's run as the bracket's lower end: a greedy share can jump
    // (the chat pair's replies are alike), and an end already known keeps the search from wandering.
    const guess = tau + (before?.shift ?? 0);
    const matched = await matchRoutedRatio((t) => greedy(o.router, t), share, { guess, ...search, ...(before ? { below: before } : {}) });
    before = { threshold: matched.threshold, routedRatio: matched.result.routedRatio, shift: matched.threshold - tau };
    const router = { ...loopRun(matched.threshold, [matched.result]), ...(await loopAnatomy(o, matched.result)) };
    // The random router routes each token with probability τ: at τ = the share the router's run reached.
    // The streams side by side: more prompts in flight, the same outputs.
    const streams = await Promise.all(
      Array.from({ length: LOOP_CHECK_RANDOM_STREAMS }, (_, stream) => greedy((prompt) => o.random(stream, prompt), router.routed_share)),
    );
    rows.push({ share, router, random: loopRun(router.routed_share, streams) });
  }
  return rows;
}
