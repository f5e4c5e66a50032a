/**
 * The threshold sweep on plain text, in two parts.
 *
 * 1. Teacher forcing: both models read each paragraph; at every position the token is routed when the
 *    router's score is below τ, and the position counts as right when the chosen model's top-1 is the
 *    true next token. The baselines route exactly as many positions: chosen at random (seeded), or those
 *    where the edge model's own top-1 probability is lowest.
 *    At fixed shares (10/20/30/50%) every method, the entropy baseline and an oracle included, routes
 *    exactly as many positions, reported as the recovered fraction of the edge→cloud gap (share-table.ts).
 *    At each share budget (`routeShares`) the edge's ShareCut is driven over the positions in order, beside
 *    fixed τ at its realized share (share-budget-table.ts), and spans of 1, 2 and 4 tokens route that share
 *    of cloud tokens (span-table.ts).
 * 2. Generation: from the first `prefixTokens` tokens of a paragraph the decoding loop generates
 *    `maxNewTokens` greedily at τ; the cloud model then scores what was generated (perplexity), and the
 *    outputs are checked for loops (rep4, stuck). The baselines generate from the same prompts with a
 *    random router at p = the router's routed share, and with the top-1 probability at the threshold
 *    whose runs route the share closest to it. Then the settings at matched shares
 *    (generation-settings.ts).
 */
import type { CloudScorer } from '../lab/cloud-scorer.ts';
import type { Router } from '../../edge/routing/router.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { scoreWithRouterPack } from '../router/batch-scorer.ts';
import type { TeacherForced } from '../lab/forced-records.ts';
import { teacherForce } from '../lab/teacher-forcing.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { forcedBaselineScores } from '../lab/baseline-routers.ts';
import { dumpRows, writeDump } from './eval-dump.ts';
import { freeRunningFigures } from '../lab/free-running-metrics.ts';
import { generationSettings, GenerationRuns, standardRouters, type GenerationSetting } from '../lab/generation-settings.ts';
import type { EvalEdge } from '../lab/generation-runs.ts';
import { continuationPrompts } from '../lab/continuation-prompts.ts';
import { lowestSelection, matchRoutedRatio, quantileThreshold, randomSelection } from '../lab/ratio-matching.ts';
import { atShare, type ShareRow } from '../lab/share-table.ts';
import { shareBudgetRows, type ShareBudgetRow } from './share-budget-table.ts';
import { spanRows, type SpanRow } from './span-table.ts';

export interface TextEvalOptions {
  edge: EvalEdge;
  /** The cloud model for teacher forcing and perplexity, in process or behind a shim (tool-cloud.ts). */
  scorer: CloudScorer;
  router: Router;
  /** The trained router's pack, scored in batches under teacher forcing; absent = the built-in top-1 scorer. */
  routerPack?: string;
  paragraphs: readonly string[];
  thresholds: readonly number[];
  seed: number;
  /** How many of the paragraphs get a generated continuation. */
  continuations: number;
  prefixTokens: number;
  maxNewTokens: number;
  /** Most runs spent matching the top-1 baseline's routed share along generations, per threshold. */
  calibrationRuns: number;
  /** Routed-share difference that ends that search early. */
  tolerance: number;
  /** Shares of the fixed-share tables (teacher forcing and generation settings); empty = none. */
  shares: readonly number[];
  /** Share budgets driven over the teacher-forced positions (share-budget-table.ts), and route spans at those shares (span-table.ts); none when omitted. */
  routeShares?: readonly number[];
  /** Write per-position scores and correctness here (JSONL). */
  dump?: string;
  /** Replace an existing regular file at `dump` (--force). */
  force?: boolean;
  progress?: ProgressReporter;
  /** Told once when paragraphs are longer than the context window and scored in windows. */
  warn?: (line: string) => void;
}

export interface TextPoint {
  threshold: number;
  /** Teacher forcing: share of positions routed, and next-token top-1 accuracy (the quality). */
  routedRatio: number;
  quality: number;
  /** Generation: share of generated tokens routed, and the cloud model's perplexity of them. */
  generatedRoutedRatio: number;
  cloudPerplexity: number;
  /** Loops in the generated text: repeating 4-grams, and outputs stuck on ≤ 2 ids (of `continuations`). */
  rep4: number;
  stuck: number;
}

export interface TextBaselinePoint extends TextPoint {
  /** The baseline's own setting: the top-1 threshold (teacher forcing / generation) or the routing probability. */
  baselineThreshold: number;
  generationBaselineThreshold: number;
  /** Runs spent matching the routed share along generations. */
  calibrationRuns: number;
  /** Random baseline only: the accuracy expected over all random choices of as many positions. */
  expectedQuality?: number;
}

export interface TextEvalResult {
  kind: 'text';
  qualityMetric: 'next_token_accuracy';
  paragraphs: number;
  positions: number;
  smallOnlyAccuracy: number;
  largeOnlyAccuracy: number;
  continuations: number;
  prefixTokens: number;
  maxNewTokens: number;
  /** Paragraphs longer than the context window, scored in consecutive windows. */
  windowedParagraphs: number;
  points: TextPoint[];
  baselines: { random: TextBaselinePoint[]; top1: TextBaselinePoint[] };
  atShare: ShareRow[];
  shareBudget: ShareBudgetRow[];
  spans: SpanRow[];
  settings: GenerationSetting[];
}

function accuracyWith(forced: TeacherForced, routed: Uint8Array): number {
  let correct = 0;
  for (let i = 0; i < forced.count; i++) correct += routed[i] ? forced.cloudCorrect[i]! : forced.edgeCorrect[i]!;
  return forced.count ? correct / forced.count : NaN;
}

function share(values: Uint8Array): number {
  let s = 0;
  for (const v of values) s += v;
  return values.length ? s / values.length : 0;
}

export async function evaluateText(o: TextEvalOptions): Promise<TextEvalResult> {
  const { edge, scorer, progress } = o;
  let forced: TeacherForced;
  try {
    progress?.start('teacher forcing', o.paragraphs.length);
    forced = await teacherForce({
      edgeModel: edge.edgeModel,
      cloud: scorer,
      tokenizer: edge.tokenizer,
      paragraphs: o.paragraphs,
      onParagraph: (done) => progress?.update(done),
    });
  } finally {
    progress?.stop();
  }
  if (forced.windowed > 0) {
    o.warn?.(
      `${forced.windowed} of ${o.paragraphs.length} paragraphs are longer than the context window (${Math.min(edge.edgeModel.pack.maxPositions, scorer.maxContext)} tokens): scored in consecutive windows, every token once`,
    );
  }
  const n = forced.count;
  const { top1, entropy } = forcedBaselineScores(forced);
  const scores = o.routerPack ? await scoreWithRouterPack(o.routerPack, forced) : top1;
  if (o.dump) await writeDump(o.dump, dumpRows(forced, scores), o.force);
  let edgeRight = 0;
  let cloudRight = 0;
  for (let i = 0; i < n; i++) {
    edgeRight += forced.edgeCorrect[i]!;
    cloudRight += forced.cloudCorrect[i]!;
  }
  const edgeOnly = n ? edgeRight / n : NaN;
  const cloudOnly = n ? cloudRight / n : NaN;

  const tf = o.thresholds.map((threshold) => {
    const routed = Uint8Array.from(scores, (s) => (s < threshold ? 1 : 0));
    const k = routed.reduce((a, b) => a + b, 0);
    const random = randomSelection(n, k, o.seed);
    const lowest = lowestSelection(top1, k);
    return {
      threshold,
      router: { routedRatio: k / Math.max(n, 1), quality: accuracyWith(forced, routed) },
      random: {
        routedRatio: share(random),
        quality: accuracyWith(forced, random),
        baselineThreshold: k / Math.max(n, 1),
        expectedQuality: edgeOnly + (k / Math.max(n, 1)) * (cloudOnly - edgeOnly),
      },
      top1: { routedRatio: share(lowest.mask), quality: accuracyWith(forced, lowest.mask), baselineThreshold: lowest.threshold },
    };
  });

  const prompts = continuationPrompts(edge, o.paragraphs, o.continuations, o.prefixTokens);
  const runs = new GenerationRuns(edge, scorer, prompts, o.maxNewTokens, standardRouters(o.router, o.seed));
  const loops = (run: { items: { ids: number[] }[] }) => {
    const f = freeRunningFigures(run.items.map((i) => i.ids));
    return { rep4: f.rep4, stuck: f.stuck };
  };
  const top1Values = Array.from(top1);

  const points: TextPoint[] = [];
  const random: TextBaselinePoint[] = [];
  const top1Points: TextBaselinePoint[] = [];
  let settings: GenerationSetting[] = [];
  try {
    progress?.start('generating', o.thresholds.length + (o.shares.length ? 1 : 0));
    for (const [i, t] of tf.entries()) {
      progress?.update(i, `τ=${t.threshold} router`);
      const generated = await runs.run('router', t.threshold);
      const target = generated.routedRatio;
      points.push({ threshold: t.threshold, ...t.router, generatedRoutedRatio: target, cloudPerplexity: generated.perplexity, ...loops(generated) });

      progress?.update(i, `τ=${t.threshold} random`);
      const randomRun = await runs.run('random', target);
      random.push({
        threshold: t.threshold,
        ...t.random,
        generatedRoutedRatio: randomRun.routedRatio,
        cloudPerplexity: randomRun.perplexity,
        ...loops(randomRun),
        generationBaselineThreshold: target,
        calibrationRuns: 1,
      });

      progress?.update(i, `τ=${t.threshold} top-1`);
      const matched = await matchRoutedRatio((threshold) => runs.run('top1', threshold), target, {
        guess: quantileThreshold(top1Values, target),
        maxRuns: o.calibrationRuns,
        tolerance: o.tolerance,
      });
      top1Points.push({
        threshold: t.threshold,
        ...t.top1,
        generatedRoutedRatio: matched.result.routedRatio,
        cloudPerplexity: matched.result.perplexity,
        ...loops(matched.result),
        generationBaselineThreshold: matched.threshold,
        calibrationRuns: matched.runs,
      });
      progress?.update(i + 1);
    }
    if (o.shares.length && prompts.length) {
      settings = await generationSettings({
        runs,
        shares: o.shares,
        routerGuess: Array.from(scores),
        calibrationRuns: o.calibrationRuns,
        tolerance: o.tolerance,
        onSetting: (label) => progress?.update(o.thresholds.length, label),
      });
    }
  } finally {
    progress?.stop();
  }

  return {
    kind: 'text',
    qualityMetric: 'next_token_accuracy',
    paragraphs: o.paragraphs.length,
    positions: n,
    smallOnlyAccuracy: edgeOnly,
    largeOnlyAccuracy: cloudOnly,
    continuations: prompts.length,
    prefixTokens: o.prefixTokens,
    maxNewTokens: o.maxNewTokens,
    windowedParagraphs: forced.windowed,
    points,
    baselines: { random, top1: top1Points },
    atShare: atShare(forced, { router: scores, top1, entropy }, o.shares, o.seed),
    shareBudget: shareBudgetRows(forced, scores, o.routeShares ?? []),
    spans: spanRows(forced, scores, o.routeShares ?? []),
    settings,
  };
}
