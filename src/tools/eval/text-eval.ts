/**
 * The threshold sweep on plain text, in two parts.
 *
 * 1. Teacher forcing: both models read each paragraph; at every position the token is routed when the
 *    router's score is below τ, and the position counts as right when the chosen model's top-1 is the
 *    true next token. The baselines route exactly as many positions: chosen at random (seeded), or those
 *    where the edge model's own top-1 probability is lowest.
 * 2. Generation: from the first `prefixTokens` tokens of a paragraph the decoding loop generates
 *    `maxNewTokens` greedily at τ; the cloud model then scores what was generated (perplexity). The
 *    baselines generate from the same prompts with a random router at p = the router's routed share, and
 *    with the top-1 probability at the threshold whose runs route the share closest to it.
 */
import type { Router } from '../../edge/router.ts';
import type { DecoderModel } from '../../shared/decoder-model.ts';
import { scoreWithRouterPack } from '../router/batch-scorer.ts';
import { teacherForce, type TeacherForced } from '../router/teacher-forcing.ts';
import type { ProgressReporter } from '../router/train-router.ts';
import { encodePrompt } from '../../edge/decoder-loop.ts';
import { cappedTopProbability, ProbeRouter, RandomRouter, TopProbabilityRouter } from './baseline-routers.ts';
import { cloudPerplexity, generateAll, type EvalEdge, type GenerationRun } from './generation-runs.ts';
import { lowestSelection, matchRoutedRatio, quantileThreshold, randomSelection } from './ratio-matching.ts';

export interface TextEvalOptions {
  edge: EvalEdge;
  llm: DecoderModel;
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
  progress?: ProgressReporter;
}

export interface TextPoint {
  threshold: number;
  /** Teacher forcing: share of positions routed, and next-token top-1 accuracy (the quality). */
  routedRatio: number;
  quality: number;
  /** Generation: share of generated tokens routed, and the cloud model's perplexity of them. */
  generatedRoutedRatio: number;
  cloudPerplexity: number;
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
  points: TextPoint[];
  baselines: { random: TextBaselinePoint[]; top1: TextBaselinePoint[] };
}

/** The edge model's (capped) top-1 probability at every teacher-forced position, in teacher-forcing order. */
async function edgeTopProbabilities(o: TextEvalOptions): Promise<Float32Array> {
  const { slm, tokenizer } = o.edge;
  const vocab = slm.pack.vocabSize;
  // The same encoding and truncation as teacherForce, so that the records line up.
  const maxLength = Math.min(slm.pack.maxPositions, o.llm.pack.maxPositions);
  const values: number[] = [];
  for (const text of o.paragraphs) {
    const ids = encodePrompt({ slm, tokenizer }, text).slice(0, maxLength);
    if (ids.length < 2) continue;
    const sequence = slm.newSequence();
    try {
      const { allLogits } = await sequence.append(ids, { allPositions: true });
      for (let i = 0; i < ids.length - 1; i++) values.push(cappedTopProbability(allLogits!.subarray(i * vocab, (i + 1) * vocab)));
    } finally {
      sequence.dispose();
    }
  }
  return Float32Array.from(values);
}

function accuracyWith(forced: TeacherForced, routed: Uint8Array): number {
  let correct = 0;
  for (let i = 0; i < forced.count; i++) correct += routed[i] ? forced.llmCorrect[i]! : forced.slmCorrect[i]!;
  return forced.count ? correct / forced.count : NaN;
}

function share(values: Uint8Array): number {
  let s = 0;
  for (const v of values) s += v;
  return values.length ? s / values.length : 0;
}

/** Prompts for the continuations: the first `prefixTokens` tokens of paragraphs long enough to continue. */
export function continuationPrompts(edge: Pick<EvalEdge, 'slm' | 'tokenizer'>, paragraphs: readonly string[], count: number, prefixTokens: number): string[] {
  const prompts: string[] = [];
  for (const text of paragraphs) {
    if (prompts.length >= count) break;
    const ids = edge.tokenizer.encode(text, { addBos: false, parseSpecialTokens: false });
    if (ids.length < prefixTokens + 2) continue;
    const prompt = edge.tokenizer.decode(ids.slice(0, prefixTokens)).trim();
    if (prompt) prompts.push(prompt);
  }
  return prompts;
}

export async function evaluateText(o: TextEvalOptions): Promise<TextEvalResult> {
  const { edge, llm, progress } = o;
  let forced: TeacherForced;
  try {
    progress?.start('teacher forcing', o.paragraphs.length);
    forced = await teacherForce({ slm: edge.slm, llm, tokenizer: edge.tokenizer, paragraphs: o.paragraphs, onParagraph: (done) => progress?.update(done) });
  } finally {
    progress?.stop();
  }
  const top1 = await edgeTopProbabilities(o);
  if (top1.length !== forced.count) throw new Error(`internal: ${top1.length} top-1 probabilities for ${forced.count} teacher-forced positions`);
  const scores = o.routerPack ? await scoreWithRouterPack(o.routerPack, forced.hidden, forced.count) : top1;
  const n = forced.count;
  let slmRight = 0;
  let llmRight = 0;
  for (let i = 0; i < n; i++) {
    slmRight += forced.slmCorrect[i]!;
    llmRight += forced.llmCorrect[i]!;
  }
  const smallOnly = n ? slmRight / n : NaN;
  const largeOnly = n ? llmRight / n : NaN;

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
        expectedQuality: smallOnly + (k / Math.max(n, 1)) * (largeOnly - smallOnly),
      },
      top1: { routedRatio: share(lowest.mask), quality: accuracyWith(forced, lowest.mask), baselineThreshold: lowest.threshold },
    };
  });

  const prompts = continuationPrompts(edge, o.paragraphs, o.continuations, o.prefixTokens);
  const settings = { maxNewTokens: o.maxNewTokens };
  const measured = new Map<string, Promise<GenerationRun & { perplexity: number }>>();
  const runWith = (key: string, router: () => Router, threshold: number) => {
    const id = `${key}@${threshold}`;
    let run = measured.get(id);
    if (!run) {
      run = (async () => {
        const generated = await generateAll(edge, router(), prompts, { ...settings, threshold });
        return { ...generated, perplexity: (await cloudPerplexity(llm, generated.items)).perplexity };
      })();
      measured.set(id, run);
    }
    return run;
  };

  const points: TextPoint[] = [];
  const random: TextBaselinePoint[] = [];
  const top1Points: TextBaselinePoint[] = [];
  try {
    progress?.start('generating', o.thresholds.length);
    for (const [i, t] of tf.entries()) {
      progress?.update(i, `τ=${t.threshold} router`);
      const probe = new ProbeRouter(o.router);
      const generated = await generateAll(edge, probe, prompts, { ...settings, threshold: t.threshold });
      const target = generated.routedRatio;
      points.push({
        threshold: t.threshold,
        ...t.router,
        generatedRoutedRatio: target,
        cloudPerplexity: (await cloudPerplexity(llm, generated.items)).perplexity,
      });

      progress?.update(i, `τ=${t.threshold} random`);
      const randomRun = await runWith('random', () => new RandomRouter(o.seed), target);
      random.push({
        threshold: t.threshold,
        ...t.random,
        generatedRoutedRatio: randomRun.routedRatio,
        cloudPerplexity: randomRun.perplexity,
        generationBaselineThreshold: target,
        calibrationRuns: 1,
      });

      progress?.update(i, `τ=${t.threshold} top-1`);
      const matched = await matchRoutedRatio((threshold) => runWith('top1', () => new TopProbabilityRouter(), threshold), target, {
        guess: quantileThreshold(probe.topProbabilities, target),
        maxRuns: o.calibrationRuns,
        tolerance: o.tolerance,
      });
      top1Points.push({
        threshold: t.threshold,
        ...t.top1,
        generatedRoutedRatio: matched.result.routedRatio,
        cloudPerplexity: matched.result.perplexity,
        generationBaselineThreshold: matched.threshold,
        calibrationRuns: matched.runs,
      });
      progress?.update(i + 1);
    }
  } finally {
    progress?.stop();
  }

  return {
    kind: 'text',
    qualityMetric: 'next_token_accuracy',
    paragraphs: o.paragraphs.length,
    positions: n,
    smallOnlyAccuracy: smallOnly,
    largeOnlyAccuracy: largeOnly,
    continuations: prompts.length,
    prefixTokens: o.prefixTokens,
    maxNewTokens: o.maxNewTokens,
    points,
    baselines: { random, top1: top1Points },
  };
}
