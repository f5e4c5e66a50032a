/**
 * What `router train` measures at its end, on documents training never saw (the text's paragraphs, or a
 * chat dataset's conversations, after the first train-fraction): the trained router against the routers a
 * user could serve instead, the built-in top-1 probability (`--router builtin`), the edge's entropy and
 * random routing.
 *
 * 1. Teacher forcing: at each share every method routes exactly as many positions, and the figure is the
 *    recovered fraction of the edge→cloud accuracy gap (lab/share-table.ts, as `bun run eval` reports it).
 * 2. Free running: from held-out prompts the decoding loop samples (or, at temperature 0, decodes greedily)
 *    with each router at the threshold whose own runs route the share (lab/generation-settings.ts); the
 *    cloud's perplexity of the output says how good the text is. Sampled runs share one seed per prompt
 *    across routers, and how much a router's output repeats itself is read from greedy runs at the same
 *    shares (greedy-loop-check.ts), where a small model's loops show.
 *
 * The verdict is plain: the router beats top-1 only where it does at every share under both.
 *
 * @example
 * const report = await heldOutReport({ edge, scorer, documents, heldOut, noun: 'paragraph', weights, features, settings: DEFAULT_REPORT, seed: 0 });
 * console.log(formatHeldOutReport(report));
 */
import type { FeatureGroup } from '../../edge/routing/router-features.ts';
import { readsToken } from '../../edge/routing/router-features.ts';
import { forcedBaselineScores } from '../lab/baseline-routers.ts';
import type { CloudScorer } from '../lab/cloud-scorer.ts';
import { routerInputs } from '../lab/feature-matrix.ts';
import { generationSettings, standardRouters, type GenerationSetting } from '../lab/generation-settings.ts';
import { pairedWithTop1, RouterRuns, SHARE_TOLERANCE, type FreeRun } from './paired-share.ts';
import { greedyLoopCheck, type LoopCheckRow } from './greedy-loop-check.ts';

export type { FreeRun };
import type { EvalEdge } from '../lab/generation-runs.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { atShare } from '../lab/share-table.ts';
import { teacherForceSequences } from '../lab/teacher-forcing.ts';
import type { TrainingDocuments } from '../lab/training-documents.ts';
import { predict, type MlpWeights } from './mlp.ts';
import { MlpRouter } from './mlp-router.ts';

/** How much held-out data the report reads (`router train --report-*`). */
export interface ReportSettings {
  /** Held-out documents teacher-forced; 0 = no report. */
  documents: number;
  /** Free-running prompts (the first tokens of held-out paragraphs, or held-out user turns); 0 = teacher forcing only. */
  prompts: number;
  /** Prompts of the greedy loop check (sampled reports only; 0 = none): the first of the same list, as many as there are up to this. */
  loopPrompts: number;
  maxNewTokens: number;
  /** Most runs spent matching a router's routed share along generations. */
  calibrationRuns: number;
  shares: readonly number[];
  /** Free-running sampling temperature; 0 decodes greedily (and then those runs' rep4 is the loop check). */
  temperature: number;
  /** A file to report on, held out as a whole (text or chat); the training text's held-out part when absent. */
  text?: string;
}

/**
 * 128 free-running prompts, sampled at temperature 1 (the OpenAI API's default), with one seed per prompt
 * shared by every router. Greedy, a small model writes nearly the same text whatever it is asked, and the
 * cloud's perplexity rewards the loops greedy text falls into, so a greedy verdict compared a few texts and their loops. Sampled, every prompt is a text of
 * its own, and the cloud's perplexity of the output measures how close the routed system's distribution
 * is to the cloud's; the samples' spread needs more prompts than greedy text did (docs/router-training.md).
 * Teacher forcing reads up to 256 held-out documents and the greedy loop check up to 192 prompts: the one
 * takes seconds, the other is not scored, and both figures moved by more than their margins on fewer.
 */
export const DEFAULT_REPORT: ReportSettings = Object.freeze({
  documents: 256,
  prompts: 128,
  loopPrompts: 192,
  maxNewTokens: 48,
  calibrationRuns: 6,
  shares: [0.1, 0.2, 0.3],
  temperature: 1,
});
/** Prompt i is sampled with seed REPORT_SAMPLING_SEED + i by every router: not the training seed, so the baselines' runs do not depend on it. */
export const REPORT_SAMPLING_SEED = 0;
/** The loop check's random stream s for prompt i is random routing's stream for prompt s · stride + i: apart from every prompt's. */
const LOOP_STREAM_STRIDE = 100_000;
/** Free-running shares further apart than this (router against top-1) are not compared: more routing alone lowers perplexity. */
export const MATCHED_WITHIN = 0.03;
/**
 * Fewer distinct outputs than this share of the prompts, by the router or by top-1 at a share: the comparison
 * rests on few texts (a small model can write the same story whatever it is asked), and the verdict says so.
 */
export const FEW_DISTINCT_OUTPUTS = 0.5;
/** Tokens of a paragraph a free-running prompt keeps (the on-policy rollouts' prompts). */
export const REPORT_PREFIX_TOKENS = 16;

export const REPORT_METHODS = ['router', 'top1', 'entropy', 'random'] as const;
export type ReportMethod = (typeof REPORT_METHODS)[number];

export interface HeldOutReport {
  noun: 'paragraph' | 'conversation';
  documents: number;
  positions: number;
  small_only_accuracy: number;
  large_only_accuracy: number;
  /** Recovered fraction of the edge→cloud gap at each share, every method routing as many positions. */
  teacher_forced: ({ share: number; oracle: number } & Record<ReportMethod, number>)[];
  free_running: {
    prompts: number;
    max_new_tokens: number;
    /** 0: greedy (and absent in reports written before sampling). */
    temperature?: number;
    small_only: Omit<FreeRun, 'tau'>;
    llm_only: Omit<FreeRun, 'tau'>;
    at_share: ({ share: number } & Record<ReportMethod, FreeRun>)[];
    /** Sampled reports only: greedy runs of the router at each share (its threshold searched again) and of random routing at their share. */
    greedy_loop_check?: LoopCheckRow[];
  };
  /** At every share: lower cloud perplexity free-running, and more of the gap under teacher forcing. */
  beats_top1: boolean;
  /** Shares where its output repeats itself more than random routing's (rep4). */
  repeats_more_than_random_at: number[];
  verdict: string;
}

export interface HeldOutReportOptions {
  edge: EvalEdge;
  scorer: CloudScorer;
  documents: TrainingDocuments;
  /** Indices of the documents to read, in file order. */
  heldOut: readonly number[];
  noun: HeldOutReport['noun'];
  weights: MlpWeights;
  features: readonly FeatureGroup[];
  settings: ReportSettings;
  seed: number;
  progress?: ProgressReporter;
}

function freeRun(s: GenerationSetting): FreeRun {
  return {
    tau: s.tau,
    routed_share: s.routed_share,
    ppl_cloud: s.ppl_cloud,
    ppl_cloud_fresh: s.ppl_cloud_fresh,
    rep4: s.rep4,
    stuck: s.stuck,
    distinct_outputs: s.distinct_outputs,
  };
}

export async function heldOutReport(o: HeldOutReportOptions): Promise<HeldOutReport> {
  const { edge, scorer, settings, progress } = o;
  const read = o.heldOut.slice(0, settings.documents);
  progress?.start('report: teacher forcing', read.length);
  const forced = await teacherForceSequences({
    edgeModel: edge.edgeModel,
    cloud: scorer,
    sequences: o.documents.sequences(read),
    onSequence: (done) => progress?.update(done),
  }).finally(() => progress?.stop());
  const router = predict(o.weights, routerInputs(forced, o.features).features, forced.count, readsToken(o.features) ? forced.proposed : undefined);
  const baselines = forcedBaselineScores(forced);
  const forcedRows = atShare(forced, { router, ...baselines }, settings.shares, o.seed);

  const heldOutPrompts = settings.prompts > 0 ? o.documents.rolloutPrompts(o.heldOut, REPORT_PREFIX_TOKENS) : [];
  const prompts = heldOutPrompts.slice(0, settings.prompts);
  let generated: GenerationSetting[] = [];
  let runs: RouterRuns | undefined;
  const routers = standardRouters(new MlpRouter(o.weights, o.features), o.seed);
  if (prompts.length > 0) {
    const sampling = settings.temperature > 0 ? { temperature: settings.temperature, seed: REPORT_SAMPLING_SEED } : {};
    runs = new RouterRuns(edge, scorer, prompts, settings.maxNewTokens, routers, sampling);
    progress?.start('report: free running', 2 + settings.shares.length * REPORT_METHODS.length);
    let done = 0;
    try {
      generated = await generationSettings({
        runs,
        shares: settings.shares,
        routerGuess: Array.from(router),
        baselineGuess: { top1: Array.from(baselines.top1), entropy: Array.from(baselines.entropy) },
        calibrationRuns: settings.calibrationRuns,
        tolerance: SHARE_TOLERANCE,
        onSetting: (label) => progress?.update(++done, label),
      });
    } finally {
      progress?.stop();
    }
  }
  const only = (method: 'small_only' | 'llm_only') => {
    const s = generated.find((g) => g.method === method);
    const { tau: _, ...rest } = s
      ? freeRun(s)
      : { tau: 0, routed_share: NaN, ppl_cloud: NaN, ppl_cloud_fresh: NaN, rep4: NaN, stuck: NaN, distinct_outputs: 0 };
    return rest;
  };
  const atShares: HeldOutReport['free_running']['at_share'] = [];
  for (const share of runs ? settings.shares : []) {
    const of = (method: ReportMethod) => freeRun(generated.find((g) => g.method === method && g.target_share === share)!);
    const top1 = of('top1');
    const router = await pairedWithTop1(runs!, of('router'), top1, settings.calibrationRuns);
    atShares.push({ share, router, top1, entropy: of('entropy'), random: of('random') });
  }
  let loopCheck: LoopCheckRow[] | undefined;
  if (runs && settings.temperature > 0 && settings.loopPrompts > 0) {
    progress?.start('report: greedy loop check', atShares.length);
    try {
      loopCheck = await greedyLoopCheck(
        {
          edge,
          scorer,
          prompts: heldOutPrompts.slice(0, settings.loopPrompts),
          maxNewTokens: settings.maxNewTokens,
          router: routers.router(),
          random: (stream, prompt) => routers.random(stream * LOOP_STREAM_STRIDE + prompt),
        },
        atShares.map((row) => ({ share: row.share, tau: row.router.tau })),
        { maxRuns: settings.calibrationRuns, tolerance: SHARE_TOLERANCE },
      );
    } finally {
      progress?.stop();
    }
  }
  const report: Omit<HeldOutReport, 'beats_top1' | 'repeats_more_than_random_at' | 'verdict'> = {
    noun: o.noun,
    documents: read.length,
    positions: forced.count,
    small_only_accuracy: forcedRows[0]?.small_only_accuracy ?? NaN,
    large_only_accuracy: forcedRows[0]?.large_only_accuracy ?? NaN,
    teacher_forced: forcedRows.map((r) => ({ share: r.share, router: r.router, top1: r.top1, entropy: r.entropy, random: r.random, oracle: r.oracle })),
    free_running: {
      prompts: prompts.length,
      max_new_tokens: settings.maxNewTokens,
      temperature: settings.temperature,
      small_only: only('small_only'),
      llm_only: only('llm_only'),
      at_share: atShares,
      ...(loopCheck ? { greedy_loop_check: loopCheck } : {}),
    },
  };
  return { ...report, ...judged(report) };
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
const outputs = (n: number) => `${n} distinct output${n === 1 ? '' : 's'}`;

/** The verdict against top-1 (the router `--router builtin` serves), and against random for repetition. */
export function judged(
  r: Pick<HeldOutReport, 'noun' | 'documents' | 'teacher_forced' | 'free_running'>,
): Pick<HeldOutReport, 'beats_top1' | 'repeats_more_than_random_at' | 'verdict'> {
  const losses: string[] = [];
  for (const row of r.teacher_forced) {
    if (!(row.router > row.top1))
      losses.push(`teacher-forced at ${pct(row.share)} routed it recovers ${pct(row.router)} of the gap against top-1's ${pct(row.top1)}`);
  }
  for (const row of r.free_running.at_share) {
    if (!(Math.abs(row.router.routed_share - row.top1.routed_share) <= MATCHED_WITHIN)) {
      losses.push(
        `free-running at ${pct(row.share)} the routed shares did not match (the router's runs ${pct(row.router.routed_share)}, top-1's ${pct(row.top1.routed_share)}), so it is not shown to win there`,
      );
    } else if (!(row.router.ppl_cloud < row.top1.ppl_cloud)) {
      losses.push(
        `free-running at ${pct(row.share)} the cloud's perplexity of its output is ${row.router.ppl_cloud.toFixed(2)} against top-1's ${row.top1.ppl_cloud.toFixed(2)}`,
      );
    }
  }
  const loops = r.free_running.greedy_loop_check;
  const repeats = (loops ?? r.free_running.at_share).filter((row) => row.router.rep4 > row.random.rep4).map((row) => row.share);
  const where = `on ${r.documents} held-out ${r.noun}s`;
  const measured = r.free_running.at_share.length ? 'under teacher forcing and free-running' : 'under teacher forcing (free-running not measured)';
  const beats = losses.length === 0 && r.teacher_forced.length > 0;
  const verdict = beats
    ? `The trained router beats the built-in top-1 router ${where}, ${measured}, at every share from ${pct(r.teacher_forced[0]!.share)} to ${pct(r.teacher_forced.at(-1)!.share)}.`
    : `The trained router does NOT beat the built-in top-1 router ${where}: ${losses.join('; ') || 'nothing was measured'}. ` +
      'Serve the built-in one with `--router builtin` (bun run start / bun run edge), or train on more text.';
  const repetition = repeats.length
    ? ` Its ${loops ? 'greedy' : 'free-running'} output repeats itself more than random routing's (rep4) at ${repeats.map(pct).join(', ')} routed.`
    : '';
  const prompts = r.free_running.prompts;
  const fewTexts = r.free_running.at_share.filter((row) =>
    [row.router, row.top1].some((run) => run.distinct_outputs !== undefined && run.distinct_outputs < prompts * FEW_DISTINCT_OUTPUTS),
  );
  const few = fewTexts.length
    ? ` The free-running comparison rests on few texts: ${fewTexts
        .map((row) => `at ${pct(row.share)} the router wrote ${outputs(row.router.distinct_outputs!)} and top-1 ${row.top1.distinct_outputs}`)
        .join('; ')}, from ${prompts} prompts; other prompts or another seed can turn it.`
    : '';
  return { beats_top1: beats, repeats_more_than_random_at: repeats, verdict: verdict + repetition + few };
}

/** How a report's free-running runs decoded; a report written before sampling has no temperature and was greedy. */
export function decoding(temperature: number | undefined): string {
  return temperature ? `sampled at temperature ${temperature}, one seed per prompt for every router` : 'greedy';
}

const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');
const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '–');
const cell = (s: string, width = 16) => s.padStart(width);

/** Whether a loop check's rows count the router's loop steps (reports before the field do not). */
export function countsLoopSteps(rows: readonly LoopCheckRow[]): boolean {
  return rows.some((row) => row.router.loop_steps !== undefined);
}

/**
 * What a loop check's columns are, for the terminal and results.md alike: the prompts and random routing's
 * streams where the rows record their outputs (reports before the field have none), the loop steps where counted.
 */
export function loopCheckCaption(rows: readonly LoopCheckRow[]): string {
  const prompts = rows[0]?.router.outputs;
  const streams = prompts && rows[0]!.random.outputs ? rows[0]!.random.outputs / prompts : 1;
  return (
    `greedy${prompts ? ` on ${prompts} prompts` : ''}: rep4 [routed share] of the router, its threshold searched for each share, ` +
    `and of random routing at its share${streams > 1 ? ` (${streams} streams pooled)` : ''}` +
    (countsLoopSteps(rows) ? "; of the router's loop steps, those both models' top-1 would take" : '')
  );
}

/** "95% of 1555": the router's loop steps that either model would have taken (greedy-loop-check.ts). */
export function sharedSteps(run: LoopCheckRow['router']): string {
  if (run.loop_steps === undefined || run.shared_loop_steps === undefined) return '–';
  return run.loop_steps ? `${pct(run.shared_loop_steps / run.loop_steps)} of ${run.loop_steps}` : 'none';
}

/** The report as the terminal shows it after training. */
export function formatHeldOutReport(r: HeldOutReport): string {
  const head = ['share', ...REPORT_METHODS.map((m) => (m === 'top1' ? 'top-1' : m))];
  const lines = [
    `held-out report: ${r.documents} ${r.noun}s, ${r.positions} positions (edge alone ${pct(r.small_only_accuracy)} next-token accuracy, cloud alone ${pct(r.large_only_accuracy)})`,
    'teacher forcing, share of the edge→cloud gap recovered:',
    [...head, 'oracle'].map((h, i) => cell(h, i ? 9 : 6)).join(''),
    ...r.teacher_forced.map((row) => [cell(pct(row.share), 6), ...REPORT_METHODS.map((m) => cell(pct(row[m]), 9)), cell(pct(row.oracle), 9)].join('')),
  ];
  const f = r.free_running;
  if (f.at_share.length) {
    lines.push(
      `free running (${f.prompts} prompts, ${f.max_new_tokens} tokens, ${decoding(f.temperature)}), the cloud's perplexity of the output (rep4) [routed share reached]:`,
      head.map((h, i) => cell(h, i ? 24 : 6)).join(''),
      ...f.at_share.map((row) =>
        [cell(pct(row.share), 6), ...REPORT_METHODS.map((m) => cell(`${f2(row[m].ppl_cloud)} (${f3(row[m].rep4)}) [${pct(row[m].routed_share)}]`, 24))].join(
          '',
        ),
      ),
      `edge alone ${f2(f.small_only.ppl_cloud)} (${f3(f.small_only.rep4)}); cloud alone ${f2(f.llm_only.ppl_cloud)} (${f3(f.llm_only.rep4)})`,
      "the cloud's perplexity of the tokens outside repeated 4-grams (repeating text scores lower for it):",
      ...f.at_share.map((row) => [cell(pct(row.share), 6), ...REPORT_METHODS.map((m) => cell(f2(row[m].ppl_cloud_fresh), 24))].join('')),
      `distinct outputs, of ${f.prompts}:`,
      ...f.at_share.map((row) => [cell(pct(row.share), 6), ...REPORT_METHODS.map((m) => cell(String(row[m].distinct_outputs ?? '–'), 24))].join('')),
    );
    const loops = f.greedy_loop_check;
    if (loops) {
      const anatomy = countsLoopSteps(loops);
      lines.push(
        `the loop check, ${loopCheckCaption(loops)}:`,
        ...loops.map((row) =>
          [
            cell(pct(row.share), 6),
            ...[row.router, row.random].map((run) => cell(`${f3(run.rep4)} [${pct(run.routed_share)}]`, 24)),
            ...(anatomy ? [cell(sharedSteps(row.router), 24)] : []),
          ].join(''),
        ),
      );
    }
  }
  lines.push(r.verdict);
  return lines.join('\n');
}
