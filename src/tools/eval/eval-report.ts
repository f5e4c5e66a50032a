/**
 * What `bun run eval` prints: Markdown tables for people, and one JSON object (snake_case keys) for
 * programs: `{dataset, points: [{threshold, routed_ratio, quality, ...}], baselines: {random, top1}, ...}`.
 */
import type { ChoiceEvalResult } from './choice-eval.ts';
import type { DatasetFormat } from './eval-dataset.ts';
import type { TextEvalResult } from './text-eval.ts';

export type EvalResult = TextEvalResult | ChoiceEvalResult;

export interface EvalReport {
  dataset: string;
  format: DatasetFormat;
  /** Which items were evaluated, in words (e.g. "paragraphs 985-1230 of 1230 (after the first 80%)"). */
  selection: string;
  slm: string;
  llm: string;
  router: string;
  seed: number;
  result: EvalResult;
}

const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '–');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---:')), ...rows.map(line)].join('\n');
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
  return [
    `${r.paragraphs} paragraphs, ${r.positions} teacher-forced positions; small-only next-token accuracy ${f3(r.smallOnlyAccuracy)}, large-only ${f3(r.largeOnlyAccuracy)}.`,
    '',
    'Next-token top-1 accuracy under teacher forcing (the baselines route exactly as many positions as the router):',
    '',
    tf,
    '',
    `Generated continuations (${r.continuations} prompts of ${r.prefixTokens} tokens, ${r.maxNewTokens} new tokens, greedy): the cloud model's perplexity of the generated tokens (lower is better), baselines matched to the router's routed share:`,
    '',
    gen,
  ].join('\n');
}

function choiceMarkdown(r: ChoiceEvalResult): string {
  const rows = r.points.map((p, i) => {
    const rand = r.baselines.random[i]!;
    const top = r.baselines.top1[i]!;
    return [
      p.threshold.toFixed(2),
      f3(p.routedRatio),
      f3(p.quality),
      f3(p.noAnswerRate),
      f3(rand.routedRatio),
      f3(rand.quality),
      f3(rand.noAnswerRate),
      f3(top.baselineThreshold),
      f3(top.routedRatio),
      f3(top.quality),
      f3(top.noAnswerRate),
    ];
  });
  return [
    `${r.questions} questions; chance accuracy ${f3(r.chanceAccuracy)}; up to ${r.maxNewTokens} new tokens per answer (greedy, ending at a newline).`,
    '',
    table(
      ['τ', 'routed', 'accuracy', 'no answer', 'random routed', 'random acc.', 'random no ans.', 'top-1 τ', 'top-1 routed', 'top-1 acc.', 'top-1 no ans.'],
      rows,
    ),
  ].join('\n');
}

export function formatMarkdown(report: EvalReport): string {
  const r = report.result;
  return [
    `## ${report.dataset} (${report.format})`,
    '',
    `${report.selection}. Edge ${report.slm}, cloud ${report.llm}, router ${report.router}; random baseline seed ${report.seed}.`,
    '',
    r.kind === 'text' ? textMarkdown(r) : choiceMarkdown(r),
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
  const { kind: _kind, ...result } = report.result;
  return snakeKeys({
    dataset: report.dataset,
    format: report.format,
    selection: report.selection,
    slm: report.slm,
    llm: report.llm,
    router: report.router,
    seed: report.seed,
    ...result,
  }) as Record<string, unknown>;
}
