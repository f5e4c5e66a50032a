/**
 * docs/results.md's routing-quality sections, from `bun run eval --json` output: held-out text (teacher
 * forcing, generated continuations, fixed shares, free-running generation) and multiple choice, each with
 * the plots the same run wrote under docs/plots/.
 *
 * @example
 * ```ts
 * const markdown = textEvalSection(readDataFile('docs/results', 'demo-eval-tinystories'), {
 *   plots: 'demo-tinystories', defaultThreshold: 0.7,
 * });
 * ```
 */
import { existsSync, readdirSync } from 'node:fs';
import type { DataFile, Fields } from './data-file.ts';
import { f2, f3, pct, provenance, shortName, table } from './markdown.ts';

/** Where the eval's plots are, relative to the repository root and to docs/results.md. */
export const PLOTS_DIR = 'docs/plots';

/** Every plot the eval writes, by the last part of its file name, with what it shows. */
const PLOT_CAPTIONS: Record<string, string> = {
  quality: 'Quality vs threshold',
  'quality-vs-routed': 'Next-token accuracy vs routed share',
  routed: 'Routed share vs threshold',
  perplexity: "Cloud model's perplexity of the generated continuations vs threshold",
  'recovered-at-share': 'Recovered share of the accuracy gap at fixed routed shares',
  'stuck-at-share': 'Stuck outputs at fixed routed shares',
  'perplexity-at-share': "Cloud model's perplexity of free-running generations at fixed routed shares",
};

/** The run's plots (`<prefix>-<metric>.svg`) as Markdown images; throws when there are none or one is unknown. */
function plots(prefix: string): string {
  const files = existsSync(PLOTS_DIR) ? readdirSync(PLOTS_DIR).filter((f) => f.startsWith(`${prefix}-`) && f.endsWith('.svg')) : [];
  if (files.length === 0) throw new Error(`${PLOTS_DIR} has no ${prefix}-*.svg: run the eval with --out ${PLOTS_DIR} --name ${prefix}`);
  const metrics = Object.keys(PLOT_CAPTIONS);
  const metricOf = (file: string) => file.slice(prefix.length + 1, -'.svg'.length);
  for (const file of files) {
    if (!metrics.includes(metricOf(file))) throw new Error(`${PLOTS_DIR}/${file}: no caption for "${metricOf(file)}" in eval-sections.ts`);
  }
  return files
    .sort((a, b) => metrics.indexOf(metricOf(a)) - metrics.indexOf(metricOf(b)))
    .map((file) => `![${PLOT_CAPTIONS[metricOf(file)]}](plots/${file})`)
    .join('\n');
}

export function packsLine(d: Fields): string {
  return `Edge model \`${shortName(d.str('slm'))}\`, cloud model \`${shortName(d.str('llm'))}\`, router \`${shortName(d.str('router'))}\`; data set \`${shortName(d.str('dataset'))}\`: ${d.str('selection')}.`;
}

/** The point measured at τ, which the section's sentences quote; throws if the run did not measure it. */
export function pointAt(points: Fields[], threshold: number, file: string): { point: Fields; index: number } {
  const index = points.findIndex((p) => Math.abs(p.num('threshold') - threshold) < 1e-9);
  if (index < 0) throw new Error(`${file}: no point at τ ${threshold} (run the eval with it among --thresholds)`);
  return { point: points[index]!, index };
}

export interface TextEvalSectionOptions {
  /** The plots' file-name prefix (the eval's --name). */
  plots: string;
  /** The router's default τ (router.json's default_threshold), whose row the summary quotes. */
  defaultThreshold: number;
}

export function textEvalSection(file: DataFile, options: TextEvalSectionOptions): string {
  const d = file.data;
  const points = d.list('points');
  const random = d.obj('baselines').list('random');
  const top1 = d.obj('baselines').list('top1');
  const atShare = d.obj('teacher_forcing').list('at_share');
  const settings = d.obj('generation').list('settings');
  const small = d.num('small_only_accuracy');
  const large = d.num('large_only_accuracy');
  const { point: atDefault, index } = pointAt(points, options.defaultThreshold, file.data.file);
  const { point: edgeAlone } = pointAt(points, 0, file.data.file);
  const share30 = atShare.find((row) => row.num('share') === 0.3) ?? atShare[0]!;

  const teacherForcing = table(
    ['τ', 'routed', 'router', 'random', 'top-1 prob.', 'top-1 τ'],
    points.map((p, i) => [
      f2(p.num('threshold')),
      f3(p.num('routed_ratio')),
      f3(p.num('quality')),
      f3(random[i]!.num('quality')),
      f3(top1[i]!.num('quality')),
      f3(top1[i]!.num('baseline_threshold')),
    ]),
  );
  const continuations = table(
    ['τ', 'router routed', 'router PPL', 'random routed', 'random PPL', 'top-1 routed', 'top-1 PPL'],
    points.map((p, i) => [
      f2(p.num('threshold')),
      f3(p.num('generated_routed_ratio')),
      f2(p.num('cloud_perplexity')),
      f3(random[i]!.num('generated_routed_ratio')),
      f2(random[i]!.num('cloud_perplexity')),
      f3(top1[i]!.num('generated_routed_ratio')),
      f2(top1[i]!.num('cloud_perplexity')),
    ]),
  );
  const shares = table(
    ['share', 'router', 'random', 'top-1 prob.', 'entropy', 'oracle'],
    atShare.map((row) => [
      pct(row.num('share')),
      pct(row.num('router')),
      pct(row.num('random')),
      pct(row.num('top1')),
      pct(row.num('entropy')),
      pct(row.num('oracle')),
    ]),
  );
  const freeRunning = table(
    ['method', 'target share', 'τ', 'routed', 'rep4', 'stuck', 'cloud PPL', 'LCP with llm_only'],
    settings.map((g) => {
      const target = g.numOrNull('target_share');
      return [
        g.str('method'),
        target === null ? '–' : pct(target),
        f3(g.num('tau')),
        f3(g.num('routed_share')),
        f3(g.num('rep4')),
        `${g.num('stuck')}/${g.num('outputs')}`,
        f2(g.num('ppl_cloud')),
        f2(g.num('lcp_llm_only')),
      ];
    }),
  );
  return [
    provenance(file),
    '',
    packsLine(d),
    '',
    `${d.num('paragraphs')} paragraphs, ${d.num('positions')} teacher-forced positions. Next-token accuracy of the edge model alone ` +
      `${f3(small)}, of the cloud model alone ${f3(large)}. At the router's default τ ${options.defaultThreshold}, ` +
      `${pct(atDefault.num('routed_ratio'))} of teacher-forced positions and ${pct(atDefault.num('generated_routed_ratio'))} of generated tokens ` +
      `are routed; the cloud model's perplexity of the continuations is ${f2(atDefault.num('cloud_perplexity'))}, against ` +
      `${f2(random[index]!.num('cloud_perplexity'))} for random routing of the same share (the edge model alone: ${f2(edgeAlone.num('cloud_perplexity'))}). ` +
      `At ${pct(share30.num('share'))} of positions routed, the router recovers ${pct(share30.num('router'))} of the accuracy gap, ` +
      `random routing ${pct(share30.num('random'))}, the edge's top-1 probability ${pct(share30.num('top1'))}.`,
    '',
    'Next-token top-1 accuracy under teacher forcing (the baselines route exactly as many positions as the router):',
    '',
    teacherForcing,
    '',
    `Generated continuations (${d.num('continuations')} prompts of ${d.num('prefix_tokens')} tokens, ${d.num('max_new_tokens')} new tokens, greedy): ` +
      "the cloud model's perplexity of the generated tokens (PPL, lower is better), the baselines matched to the router's routed share:",
    '',
    continuations,
    '',
    `Teacher forcing at fixed routed shares: the recovered fraction of the gap between ${f3(small)} and ${f3(large)}:`,
    '',
    shares,
    '',
    'Free-running generation at matched routed shares (stuck: the last 16 tokens use at most 2 ids; rep4: the share of 4-grams ' +
      "repeating an earlier one; LCP: the mean common prefix with the cloud model's own output):",
    '',
    freeRunning,
    '',
    plots(options.plots),
  ].join('\n');
}

export function choiceEvalSection(file: DataFile, options: { plots: string }): string {
  const d = file.data;
  const points = d.list('points');
  const random = d.obj('baselines').list('random');
  const top1 = d.obj('baselines').list('top1');
  const rows = points.map((p, i) => [
    f2(p.num('threshold')),
    f3(p.num('routed_ratio')),
    f3(p.num('quality')),
    f3(p.num('no_answer_rate')),
    f3(random[i]!.num('quality')),
    f3(top1[i]!.num('routed_ratio')),
    f3(top1[i]!.num('quality')),
  ]);
  const chance = d.num('chance_accuracy');
  const best = Math.max(...points.map((p) => p.num('quality')), ...random.map((p) => p.num('quality')), ...top1.map((p) => p.num('quality')));
  const leastNoAnswer = Math.min(...points.map((p) => p.num('no_answer_rate')));
  // Below chance everywhere, the table can only show the routing mechanics; the page says so from the data.
  const reading =
    best < chance
      ? ` Every method stays below chance (at best ${f3(best)}) and at least ${pct(leastNoAnswer)} of the router's outputs name no ` +
        'choice at any τ: these models do not answer questions, so the table shows the mechanics on out-of-domain prompts ' +
        '(the routed share follows τ, the baselines route the same share), not answer quality.'
      : '';
  return [
    provenance(file),
    '',
    packsLine(d),
    '',
    `${d.num('questions')} questions, answered by real generations (up to ${d.num('max_new_tokens')} new tokens, greedy); ` +
      `chance accuracy ${f3(chance)}.${reading} The baselines route the same share of generated tokens as the router:`,
    '',
    table(['τ', 'routed', 'accuracy', 'no answer', 'random acc.', 'top-1 routed', 'top-1 acc.'], rows),
    '',
    plots(options.plots),
  ].join('\n');
}
