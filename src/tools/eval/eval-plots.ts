/**
 * SVG plots of a threshold sweep, drawn with Vega-Lite and rendered headless by Vega's SVG renderer
 * (no canvas, no network: text widths are estimated).
 *
 * @example
 * const files = evalPlots(report.result, 'tinystories'); // { 'tinystories-quality.svg': '<svg ...', ... }
 */
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { EvalResult } from './eval-report.ts';
import type { GenerationSetting } from '../lab/generation-settings.ts';

export interface Series {
  name: string;
  points: { x: number; y: number }[];
  dashed?: boolean;
}

export interface LineChart {
  title: string;
  xTitle: string;
  yTitle: string;
  series: Series[];
  /** Fix the y axis at [0, 1] (ratios). */
  unitY?: boolean;
  /** A logarithmic y axis (perplexities). */
  logY?: boolean;
  /** A logarithmic x axis (a sweep over powers of two); else x is fixed at [0, 1] (thresholds). */
  logX?: boolean;
}

/** One line (with points) per series, colour by series, dashed where asked. */
export async function lineChartSvg(chart: LineChart): Promise<string> {
  return renderSvg({ $schema: VEGA_LITE_SCHEMA, background: 'white', ...lineChartSpec(chart) });
}

/** Several line charts one above the other in one SVG (a benchmark's figures against one x). */
export async function lineChartsSvg(charts: LineChart[]): Promise<string> {
  return renderSvg({ $schema: VEGA_LITE_SCHEMA, background: 'white', vconcat: charts.map(lineChartSpec) } as TopLevelSpec);
}

const VEGA_LITE_SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';

function lineChartSpec(chart: LineChart) {
  const values = chart.series.flatMap((s) =>
    s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).map((p) => ({ ...p, series: s.name, dashed: s.dashed ? 'yes' : 'no' })),
  );
  return {
    title: chart.title,
    width: 480,
    height: 300,
    data: { values },
    mark: { type: 'line' as const, point: true, strokeWidth: 1.5 },
    encoding: {
      x: { field: 'x', type: 'quantitative' as const, title: chart.xTitle, scale: chart.logX ? { type: 'log' as const } : { domain: [0, 1] } },
      y: {
        field: 'y',
        type: 'quantitative' as const,
        title: chart.yTitle,
        scale: chart.unitY ? { domain: [0, 1] } : chart.logY ? { type: 'log' as const } : { zero: false },
      },
      color: {
        field: 'series',
        type: 'nominal' as const,
        title: null,
        sort: chart.series.map((s) => s.name),
        legend: { orient: 'bottom' as const, columns: 1, labelLimit: 0 },
      },
      strokeDash: {
        field: 'dashed',
        type: 'nominal' as const,
        legend: null,
        scale: {
          domain: ['no', 'yes'],
          range: [
            [1, 0],
            [5, 3],
          ],
        },
      },
      order: { field: 'x', type: 'quantitative' as const },
    },
  };
}

async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

const ROUTER = 'trained router';
const RANDOM = 'random, same routed share';
const TOP1 = 'edge top-1 probability, same routed share';

/** The plots of one evaluation, by file name (`<name>-quality.svg`, `<name>-routed.svg`, ...). */
export async function evalPlots(result: EvalResult, name: string): Promise<Record<string, string>> {
  // The privacy cost run has one τ or a few, two runs each, and a chat run reports shares of replies: their tables say it all.
  if (result.kind === 'private-spans' || result.kind === 'chat') return {};
  const along = <T extends { threshold: number }>(points: T[], y: (p: T) => number) => points.map((p) => ({ x: p.threshold, y: y(p) }));
  const charts: Record<string, LineChart> = {};
  if (result.kind === 'text') {
    const { points } = result;
    const { random, top1 } = result.baselines;
    charts.quality = {
      title: 'Next-token accuracy under teacher forcing vs threshold',
      xTitle: 'threshold τ (trained router)',
      yTitle: 'next-token top-1 accuracy',
      series: [
        { name: ROUTER, points: along(points, (p) => p.quality) },
        { name: RANDOM, points: along(random, (p) => p.quality), dashed: true },
        { name: TOP1, points: along(top1, (p) => p.quality), dashed: true },
      ],
    };
    charts.routed = {
      title: 'Routed-token share vs threshold',
      xTitle: 'threshold τ (trained router)',
      yTitle: 'share of tokens routed to the cloud',
      unitY: true,
      series: [
        { name: 'trained router, teacher forcing', points: along(points, (p) => p.routedRatio) },
        { name: 'trained router, generation', points: along(points, (p) => p.generatedRoutedRatio) },
        { name: `${RANDOM}, generation`, points: along(random, (p) => p.generatedRoutedRatio), dashed: true },
        { name: `${TOP1}, generation`, points: along(top1, (p) => p.generatedRoutedRatio), dashed: true },
      ],
    };
    charts.perplexity = {
      title: "Cloud model's perplexity of generated continuations vs threshold",
      xTitle: 'threshold τ (trained router)',
      yTitle: 'perplexity (log scale, lower is better)',
      logY: true,
      series: [
        { name: ROUTER, points: along(points, (p) => p.cloudPerplexity) },
        { name: RANDOM, points: along(random, (p) => p.cloudPerplexity), dashed: true },
        { name: TOP1, points: along(top1, (p) => p.cloudPerplexity), dashed: true },
      ],
    };
    charts['quality-vs-routed'] = {
      title: 'Next-token accuracy vs routed share (teacher forcing)',
      xTitle: 'share of tokens routed to the cloud',
      yTitle: 'next-token top-1 accuracy',
      series: [
        { name: ROUTER, points: points.map((p) => ({ x: p.routedRatio, y: p.quality })) },
        { name: RANDOM, points: random.map((p) => ({ x: p.routedRatio, y: p.quality })), dashed: true },
        { name: TOP1, points: top1.map((p) => ({ x: p.routedRatio, y: p.quality })), dashed: true },
      ],
    };
    if (result.atShare.length) {
      const at = (key: 'router' | 'random' | 'top1' | 'entropy' | 'oracle') => result.atShare.map((r) => ({ x: r.share, y: r[key] }));
      charts['recovered-at-share'] = {
        title: 'Recovered share of the accuracy gap at fixed routed shares (teacher forcing)',
        xTitle: 'share of positions routed',
        yTitle: '(accuracy − edge alone) / (cloud alone − edge alone)',
        series: [
          { name: ROUTER, points: at('router') },
          { name: 'random', points: at('random'), dashed: true },
          { name: 'edge top-1 probability', points: at('top1'), dashed: true },
          { name: 'edge entropy', points: at('entropy'), dashed: true },
          { name: 'oracle', points: at('oracle'), dashed: true },
        ],
      };
    }
    if (result.settings.length) {
      const settings = result.settings;
      const of = (method: string, y: (g: GenerationSetting) => number) =>
        settings.filter((g) => g.method === method).map((g) => ({ x: g.routed_share, y: y(g) }));
      const methods: [string, string, boolean][] = [
        ['router', ROUTER, false],
        ['random', 'random', true],
        ['top1', 'edge top-1 probability', true],
        ['entropy', 'edge entropy', true],
      ];
      charts['stuck-at-share'] = {
        title: 'Free-running outputs stuck in a loop vs routed share',
        xTitle: 'share of generated tokens routed to the cloud',
        yTitle: 'share of outputs whose last 16 tokens use ≤ 2 ids',
        unitY: true,
        series: methods.map(([m, label, dashed]) => ({ name: label, points: of(m, (g) => g.stuck / Math.max(g.outputs, 1)), dashed })),
      };
      charts['perplexity-at-share'] = {
        title: "Cloud model's perplexity of free-running text vs routed share",
        xTitle: 'share of generated tokens routed to the cloud',
        yTitle: 'perplexity (log scale, lower is better)',
        logY: true,
        series: methods.map(([m, label, dashed]) => ({ name: label, points: of(m, (g) => g.ppl_cloud), dashed })),
      };
    }
  } else {
    const { points } = result;
    const { random, top1 } = result.baselines;
    const span = points.map((p) => p.threshold);
    const chance = [Math.min(...span), Math.max(...span)].map((x) => ({ x, y: result.chanceAccuracy }));
    charts.quality = {
      title: 'Multiple-choice accuracy vs threshold',
      xTitle: 'threshold τ (trained router)',
      yTitle: 'accuracy; share with no answer',
      unitY: true,
      series: [
        { name: ROUTER, points: along(points, (p) => p.quality) },
        { name: RANDOM, points: along(random, (p) => p.quality), dashed: true },
        { name: TOP1, points: along(top1, (p) => p.quality), dashed: true },
        { name: 'chance', points: chance, dashed: true },
        { name: 'no answer (trained router)', points: along(points, (p) => p.noAnswerRate), dashed: true },
      ],
    };
    charts.routed = {
      title: 'Routed-token share vs threshold',
      xTitle: 'threshold τ (trained router)',
      yTitle: 'share of generated tokens routed to the cloud',
      unitY: true,
      series: [
        { name: ROUTER, points: along(points, (p) => p.routedRatio) },
        { name: RANDOM, points: along(random, (p) => p.routedRatio), dashed: true },
        { name: TOP1, points: along(top1, (p) => p.routedRatio), dashed: true },
      ],
    };
  }
  const files: Record<string, string> = {};
  for (const [key, chart] of Object.entries(charts)) files[`${name}-${key}.svg`] = await lineChartSvg(chart);
  return files;
}
