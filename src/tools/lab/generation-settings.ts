/**
 * Free-running generation at matched routed shares: for each share, the trained router and the
 * baselines (random, the edge's top-1 probability, its entropy) each generate from the same prompts with
 * their threshold searched until their own runs route that share; plus the edge alone and the cloud
 * alone. Each setting reports what a reader sees: loops (rep4, stuck outputs), the cloud's perplexity of
 * the text, how long it follows the cloud-only output, and a few examples.
 *
 * @example
 * const settings = await generationSettings({ runs, shares: [0.1, 0.3], routerGuess, calibrationRuns: 6, tolerance: 0.005, seed: 0 });
 */
import type { CloudScorer } from './cloud-scorer.ts';
import type { Router } from '../../edge/routing/router.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { EntropyRouter, RandomRouter, TopProbabilityRouter } from './baseline-routers.ts';
import { freeRunningFigures } from './free-running-metrics.ts';
import { cloudPerplexity, generateAll, type EvalEdge, type GenerationRun, type GenerationSettings, type Prompt } from './generation-runs.ts';
import { matchRoutedRatio, quantileThreshold } from './ratio-matching.ts';

export const GENERATION_METHODS = ['small_only', 'llm_only', 'router', 'random', 'top1', 'entropy'] as const;
export type GenerationMethod = (typeof GENERATION_METHODS)[number];
/** Example outputs kept per setting. */
export const EXAMPLES_PER_SETTING = 3;

export type MeasuredRun = GenerationRun & { perplexity: number; freshPerplexity: number };

export interface GenerationSetting {
  method: GenerationMethod;
  tau: number;
  /** The routed share the setting was matched to (null for small_only and llm_only). */
  target_share: number | null;
  routed_share: number;
  rep4: number;
  stuck: number;
  outputs: number;
  /** Outputs that differ from each other (freeRunningFigures' distinct). */
  distinct_outputs: number;
  ppl_cloud: number;
  /** The cloud's perplexity of the tokens that do not end a repeated 4-gram (cloudPerplexity's freshPerplexity). */
  ppl_cloud_fresh: number;
  lcp_llm_only: number;
  calibration_runs: number;
  examples: string[];
}

/**
 * Prompts a run generates at once (generateAll's lanes): one prompt at a time leaves a core idle for part
 * of each step, while it waits for onnxruntime's thread and back. The outputs are the same for any number.
 */
export const GENERATION_LANES = 4;

/** Generation runs by method and threshold, each made once however often it is asked for. */
export class GenerationRuns {
  private readonly cache = new Map<string, Promise<MeasuredRun>>();

  constructor(
    private readonly edge: EvalEdge,
    private readonly scorer: CloudScorer,
    private readonly prompts: readonly Prompt[],
    private readonly maxNewTokens: number,
    /** Each method's router for prompt i (a fresh random stream per prompt, so that lanes do not change it). */
    private readonly routers: Record<Exclude<GenerationMethod, 'small_only' | 'llm_only'>, (prompt: number) => Router>,
    private readonly sampling: Pick<GenerationSettings, 'temperature' | 'seed'> = {},
  ) {}

  run(method: Exclude<GenerationMethod, 'small_only' | 'llm_only'>, threshold: number): Promise<MeasuredRun> {
    const key = `${method}@${threshold}`;
    let run = this.cache.get(key);
    if (!run) {
      run = (async () => {
        const generated = await generateAll(this.edge, this.routers[method], this.prompts, {
          threshold,
          maxNewTokens: this.maxNewTokens,
          lanes: GENERATION_LANES,
          ...this.sampling,
        });
        const { perplexity, freshPerplexity } = await cloudPerplexity(this.scorer, generated.items);
        return { ...generated, perplexity, freshPerplexity };
      })();
      this.cache.set(key, run);
    }
    return run;
  }

  /** The edge alone (any router at τ = 0) and the cloud alone (the random router at τ = 1 routes every token). */
  edgeOnly(): Promise<MeasuredRun> {
    return this.run('random', 0);
  }

  cloudOnly(): Promise<MeasuredRun> {
    return this.run('random', 1);
  }
}

export function standardRouters(router: Router, seed: number) {
  return {
    router: () => router,
    random: (prompt: number) => new RandomRouter(seed + prompt),
    top1: () => new TopProbabilityRouter(),
    entropy: () => new EntropyRouter(),
  };
}

function setting(
  method: GenerationMethod,
  tau: number,
  target: number | null,
  run: MeasuredRun,
  reference: MeasuredRun,
  calibrationRuns: number,
): GenerationSetting {
  const figures = freeRunningFigures(
    run.items.map((i) => i.ids),
    reference.items.map((i) => i.ids),
  );
  return {
    method,
    tau,
    target_share: target,
    routed_share: run.routedRatio,
    rep4: figures.rep4,
    stuck: figures.stuck,
    outputs: figures.outputs,
    distinct_outputs: figures.distinct,
    ppl_cloud: run.perplexity,
    ppl_cloud_fresh: run.freshPerplexity,
    lcp_llm_only: figures.lcp!,
    calibration_runs: calibrationRuns,
    examples: run.items.slice(0, EXAMPLES_PER_SETTING).map((i) => i.text),
  };
}

export interface SettingsOptions {
  runs: GenerationRuns;
  shares: readonly number[];
  /** Router scores under teacher forcing, for the router's first threshold guess at each share. */
  routerGuess: readonly number[];
  /** The baselines' teacher-forced scores, for their first guesses too; without them a baseline starts at τ = share. */
  baselineGuess?: { top1: readonly number[]; entropy: readonly number[] };
  calibrationRuns: number;
  tolerance: number;
  onSetting?: (label: string) => void;
}

export async function generationSettings(o: SettingsOptions): Promise<GenerationSetting[]> {
  const reference = await o.runs.cloudOnly();
  const settings: GenerationSetting[] = [
    setting('small_only', 0, null, await o.runs.edgeOnly(), reference, 1),
    setting('llm_only', 1, null, reference, reference, 1),
  ];
  for (const share of o.shares) {
    for (const method of ['router', 'random', 'top1', 'entropy'] as const) {
      o.onSetting?.(`${method} at ${share}`);
      if (method === 'random') {
        settings.push(setting(method, share, share, await o.runs.run('random', share), reference, 1));
        continue;
      }
      const scores = method === 'router' ? o.routerGuess : o.baselineGuess?.[method];
      const guess = scores ? quantileThreshold(scores, share) : share;
      const matched = await matchRoutedRatio((t) => o.runs.run(method, t), share, { guess, maxRuns: o.calibrationRuns, tolerance: o.tolerance });
      settings.push(setting(method, matched.threshold, share, matched.result, reference, matched.runs));
    }
  }
  return settings;
}
