/**
 * What `bun run eval` prints: Markdown tables for people, and one JSON object (snake_case keys) for
 * programs: `{dataset, points: [{threshold, routed_ratio, quality, rep4, stuck, ...}], baselines: {random, top1},
 * teacher_forcing: {at_share: [{share, router, random, top1, entropy, oracle, small_only_accuracy,
 * large_only_accuracy}], share_budget: [{share, scope, realized_share, full_window_min, full_window_max, guarded,
 * budget_recovered, tau, tau_share, tau_recovered, ...}], spans: [{share, span, tau, cloud_share,
 * round_trips_per_100, recovered}]}, generation: {settings: [{method, tau, routed_share, rep4, stuck, ppl_cloud,
 * lcp_llm_only, examples, ...}]}}` for text; `--private-entities` runs: private-spans-report.ts; chat datasets:
 * chat-eval-report.ts.
 */
import type { ChatEvalResult } from './chat-eval.ts';
import { chatJson, chatMarkdown } from './chat-eval-report.ts';
import type { ChoiceEvalResult } from './choice-eval.ts';
import type { DatasetFormat } from './eval-dataset.ts';
import type { PrivateSpansResult } from './private-spans-eval.ts';
import { privateSpansJson, privateSpansMarkdown } from './private-spans-report.ts';
import { f2, f3, pct, table } from './report-format.ts';
import type { TextEvalResult } from './text-eval.ts';

export type EvalResult = TextEvalResult | ChoiceEvalResult | PrivateSpansResult | ChatEvalResult;

export interface EvalReport {
  dataset: string;
  format: DatasetFormat;
  /** Which items were evaluated, in words (e.g. "paragraphs 985-1230 of 1230 (after the first 80%)"). */
  selection: string;
  edgeModel: string;
  cloudModel: string;
  router: string;
  seed: number;
  result: EvalResult;
}

function textMarkdown(r: TextEvalResult): string {
  const tf = table(
    ['τ', 'routed', 'router', 'random', 'random (expected)', 'top-1 prob.', 'top-1 τ'],
    r.points.map((p, i) => {
      const rand = r.baselines.random[i]!;
      const top = r.baselines.top1[i]!;
      return [
        p.threshold.toFixed(2),
        f3(p.routedRatio),
        f3(p.quality),
        f3(rand.quality),
        f3(rand.expectedQuality ?? NaN),
        f3(top.quality),
        f3(top.baselineThreshold),
      ];
    }),
  );
  const gen = table(
    ['τ', 'router routed', 'router PPL', 'random routed', 'random PPL', 'top-1 routed', 'top-1 PPL', 'top-1 τ'],
    r.points.map((p, i) => {
      const rand = r.baselines.random[i]!;
      const top = r.baselines.top1[i]!;
      return [
        p.threshold.toFixed(2),
        f3(p.generatedRoutedRatio),
        f2(p.cloudPerplexity),
        f3(rand.generatedRoutedRatio),
        f2(rand.cloudPerplexity),
        f3(top.generatedRoutedRatio),
        f2(top.cloudPerplexity),
        f3(top.generationBaselineThreshold),
      ];
    }),
  );
  const shares = table(
    ['share', 'router', 'random', 'top-1 prob.', 'entropy', 'oracle'],
    r.atShare.map((row) => [pct(row.share), pct(row.router), pct(row.random), pct(row.top1), pct(row.entropy), pct(row.oracle)]),
  );
  const budgets = table(
    [
      'budget',
      'scope',
      'realized',
      'full windows',
      'window min',
      'window max',
      'windows 50–199 min',
      'max',
      'guarded',
      'budget recovered',
      'τ',
      'τ share',
      'τ recovered',
      'budget − τ (points)',
    ],
    r.shareBudget.map((b) => [
      pct(b.share),
      b.scope,
      f3(b.realized_share),
      String(b.full_windows),
      f3(b.full_window_min ?? NaN),
      f3(b.full_window_max ?? NaN),
      f3(b.early_window_min ?? NaN),
      f3(b.early_window_max ?? NaN),
      String(b.guarded),
      pct(b.budget_recovered),
      f3(b.tau),
      f3(b.tau_share),
      pct(b.tau_recovered),
      f2(100 * (b.budget_recovered - b.tau_recovered)),
    ]),
  );
  const spans = table(
    ['target share', 'span', 'τ', 'cloud tokens', 'round trips / 100 tokens', 'recovered'],
    r.spans.map((s) => [pct(s.share), String(s.span), f3(s.tau), f3(s.cloud_share), f2(s.round_trips_per_100), pct(s.recovered)]),
  );
  const settings = table(
    ['method', 'target share', 'τ', 'routed', 'rep4', 'stuck', 'cloud PPL', 'LCP with llm_only'],
    r.settings.map((g) => [
      g.method,
      g.target_share === null ? '–' : pct(g.target_share),
      f3(g.tau),
      f3(g.routed_share),
      f3(g.rep4),
      `${g.stuck}/${g.outputs}`,
      f2(g.ppl_cloud),
      f2(g.lcp_llm_only),
    ]),
  );
  const examples = r.settings
    .filter((g) => g.target_share === null || g.target_share === 0.3)
    .map((g) => `- ${g.method}${g.target_share === null ? '' : ` at ${pct(g.target_share)}`}: ${g.examples.map((e) => JSON.stringify(e)).join(' · ')}`);
  const sections = [
    `${r.paragraphs} paragraphs, ${r.positions} teacher-forced positions; edge-only next-token accuracy ${f3(r.smallOnlyAccuracy)}, cloud-only ${f3(r.largeOnlyAccuracy)}.` +
      (r.windowedParagraphs ? ` ${r.windowedParagraphs} paragraphs longer than the context window were scored in consecutive windows.` : ''),
    '',
    'Next-token top-1 accuracy under teacher forcing (the baselines route exactly as many positions as the router):',
    '',
    tf,
    '',
    `Generated continuations (${r.continuations} prompts of ${r.prefixTokens} tokens, ${r.maxNewTokens} new tokens, greedy): the cloud model's perplexity of the generated tokens (lower is better), baselines matched to the router's routed share:`,
    '',
    gen,
  ];
  if (r.atShare.length) {
    sections.push(
      '',
      'Teacher forcing at fixed routed shares: recovered fraction of the edge→cloud accuracy gap (every method routes exactly as many positions):',
      '',
      shares,
    );
  }
  if (r.shareBudget.length) {
    sections.push(
      '',
      "Share budgets under teacher forcing: the edge's ShareCut driven over the positions in order with the router's scores (scope document: a fresh cut per document, as per generation; stream: one cut over all). Windows: the share routed among the last 200 tokens (full), and among all tokens so far from token 50 to 199. Recovered fraction of the edge→cloud gap beside fixed τ at the quantile of the same scores routing as many positions:",
      '',
      budgets,
      '',
      'Route spans at the same share of cloud tokens (teacher forcing: a score below τ routes that position and the next span − 1 of its document in one round trip):',
      '',
      spans,
    );
  }
  if (r.settings.length) {
    sections.push(
      '',
      `Free-running generation at matched routed shares (${r.continuations} prompts, ${r.maxNewTokens} new tokens, greedy; stuck = last 16 tokens use ≤ 2 ids; rep4 = share of 4-grams repeating an earlier one):`,
      '',
      settings,
      '',
      'Examples (first prompts; small_only, llm_only and every method at 30%):',
      '',
      ...examples,
    );
  }
  return sections.join('\n');
}

function choiceMarkdown(r: ChoiceEvalResult): string {
  const held = r.answerConstraint === 'choice';
  const rows = r.points.map((p, i) => {
    const rand = r.baselines.random[i]!;
    const top = r.baselines.top1[i]!;
    return [
      p.threshold.toFixed(2),
      f3(p.routedRatio),
      f3(p.quality),
      f3(p.noAnswerRate),
      ...(held ? [`${p.cloudTokensReplaced ?? 0} / ${p.constrainedFallbacks ?? 0}`] : []),
      f3(rand.routedRatio),
      f3(rand.quality),
      f3(rand.noAnswerRate),
      f3(top.baselineThreshold),
      f3(top.routedRatio),
      f3(top.quality),
      f3(top.noAnswerRate),
    ];
  });
  const heldLine = held
    ? ' Each answer is held to the labels by a choice constraint (exact match); "replaced / fallbacks" counts routed letters the constraint replaced by one of the cloud\'s top-k, and those where none was allowed.'
    : '';
  return [
    r.promptFormat === 'chat-template'
      ? `${r.questions} questions, each a user message through the edge pack's chat template; chance accuracy ${f3(r.chanceAccuracy)}; up to ${r.maxNewTokens} new tokens per answer (greedy, ending with the assistant's turn; the answer is the reply's first letter).${heldLine}`
      : `${r.questions} questions; chance accuracy ${f3(r.chanceAccuracy)}; up to ${r.maxNewTokens} new tokens per answer (greedy, ending at a newline).${heldLine}`,
    '',
    table(
      [
        'τ',
        'routed',
        'accuracy',
        'no answer',
        ...(held ? ['replaced / fallbacks'] : []),
        'random routed',
        'random acc.',
        'random no ans.',
        'top-1 τ',
        'top-1 routed',
        'top-1 acc.',
        'top-1 no ans.',
      ],
      rows,
    ),
  ].join('\n');
}

export function formatMarkdown(report: EvalReport): string {
  const r = report.result;
  return [
    `## ${report.dataset} (${report.format})`,
    '',
    `${report.selection}. Edge ${report.edgeModel}, cloud ${report.cloudModel}, router ${report.router}; random baseline seed ${report.seed}.`,
    '',
    r.kind === 'text' ? textMarkdown(r) : r.kind === 'private-spans' ? privateSpansMarkdown(r) : r.kind === 'chat' ? chatMarkdown(r) : choiceMarkdown(r),
  ].join('\n');
}

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A plain value with every object key in snake_case (`routedRatio` → `routed_ratio`; `top1` stays). */
function snakeKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeKeys);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [snake(k), snakeKeys(v)]));
  return value;
}

export function toJson(report: EvalReport): Record<string, unknown> {
  const { kind: _kind, ...rest } = report.result;
  const result =
    report.result.kind === 'private-spans'
      ? privateSpansJson(report.result)
      : report.result.kind === 'chat'
        ? chatJson(report.result)
        : report.result.kind === 'text'
          ? (() => {
              const { atShare, shareBudget, spans, settings, ...others } = rest as Omit<TextEvalResult, 'kind'>;
              return { ...others, teacherForcing: { atShare, shareBudget, spans }, generation: { settings } };
            })()
          : rest;
  return snakeKeys({
    dataset: report.dataset,
    format: report.format,
    selection: report.selection,
    slm: report.edgeModel,
    llm: report.cloudModel,
    router: report.router,
    seed: report.seed,
    ...result,
  }) as Record<string, unknown>;
}
