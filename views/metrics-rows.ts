/**
 * The metrics panel's rows, as [label, value, data-metric key]: a short summary in plain words, and the
 * detail a tuner reads (folded on the page, run-fragments.tsx).
 *
 * @example
 * summaryRows(metrics).map(([label]) => label);
 * // ['Tokens written', 'From the cloud', 'Speed', 'Cloud time']
 */
import type { ViewMetrics as GenerationMetrics, ViewMode as Mode } from './view-model.ts';
import { budgetRows } from './routing-budget-rows.ts';

/** [label, value, data-metric key]: one row of the metrics panel. */
export type MetricRow = [string, string, string];

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** The speculate setting, and in auto what it decided and from which figures (hit rate, round trip, edge step, saving vs cost). */
function speculationDecision(m: GenerationMetrics): string {
  const f = m.speculationFigures;
  if (m.speculateSetting !== 'auto' || !f) return m.speculateSetting;
  const { ahead, waited } = m.speculationDecisions;
  const rtt = f.roundTripMs === null ? '?' : ms(f.roundTripMs);
  const step = f.stepMs === null ? '?' : ms(f.stepMs);
  return `auto: ${ahead} / ${waited}; hit rate ${(f.hitRate * 100).toFixed(0)}%, round trip ${rtt}, edge step ${step}: saves ${ms(f.savingMs)}, costs ${ms(f.costMs)}`;
}

/** `meanBatchSize` as the page says it: a run alone, or batched with others. */
function batchText(meanBatchSize: number): string {
  if (meanBatchSize === 0) return 'no edge decode steps';
  return meanBatchSize > 1 ? `yes, ${meanBatchSize.toFixed(2)} rows per step` : 'no, each step ran alone';
}

/** Whole-run tokens a second, the wait for the first included: what the reader waited, not an edge step. */
function speedText(m: GenerationMetrics): string {
  if (m.tokens === 0 || m.totalMs <= 0) return 'no tokens';
  return `${((m.tokens * 1000) / m.totalMs).toFixed(1)} tokens/s, the first after ${ms(m.ttftMs)}`;
}

/** What the cloud's tokens cost in waiting; a down cloud costs time and gives none (its fallbacks are the edge's). */
function cloudCostText(m: GenerationMetrics): string {
  if (m.routed > 0) return `${ms(m.cloudMs)} for ${m.routed} ${m.routed === 1 ? 'token' : 'tokens'}, ${ms(m.cloudMs / m.routed)} each`;
  if (m.cloudMs > 0) return `${ms(m.cloudMs)} waiting, no token came back`;
  return 'none: every token came from the edge model';
}

/**
 * The four figures a person asks first, in plain words: how much was written, how much of it by the cloud,
 * how fast, and what the cloud cost. `tokens` and `routed` live here only, not again in the fold, so each
 * data-metric names one element.
 */
export function summaryRows(m: GenerationMetrics): MetricRow[] {
  return [
    ['Tokens written', String(m.tokens), 'tokens'],
    ['From the cloud', `${m.routed} of ${m.tokens} (${(m.routedRatio * 100).toFixed(1)}%)`, 'routed'],
    ['Speed', speedText(m), 'speed'],
    ['Cloud time', cloudCostText(m), 'cloud-cost'],
  ];
}

/** Every other figure, for whoever tunes the edge: the routing cut, timings by part, decoding ahead. */
export function detailRows(m: GenerationMetrics, mode: Mode): MetricRow[] {
  // In llm_only the edge only appends the cloud's tokens, so its time between tokens says nothing; what
  // a token costs there is the cloud's round trip (and the cloud model behind it).
  const tbt: MetricRow =
    mode === 'llm_only'
      ? ['Time per token (cloud round trip, mean)', ms(m.tokens ? m.cloudMs / m.tokens : 0), 'tbt']
      : ['Time between tokens (edge, mean / p50 / p95)', `${ms(m.tbtMeanMs)} / ${ms(m.tbtP50Ms)} / ${ms(m.tbtP95Ms)}`, 'tbt'];
  // The routing cut means nothing when one model makes every token.
  const budget = mode === 'joint' ? m.budget : undefined;
  return [
    ...(budget ? budgetRows(budget) : []),
    ['Fallback (cloud down)', String(m.fallback), 'fallback'],
    ['Prompt tokens (cached: restored from the prompt cache, not prefilled)', `${m.promptTokens} (${m.cachedTokens} cached)`, 'cached'],
    ['Time to first token', ms(m.ttftMs), 'ttft'],
    tbt,
    ['Edge model time', ms(m.slmMs), 'slm'],
    ['Batched with other runs (mean rows per edge decode step)', batchText(m.meanBatchSize), 'batch'],
    ['Router time', ms(m.routerMs), 'router'],
    ['Communication + cloud model', ms(m.cloudMs), 'cloud'],
    [
      'Decoded ahead while waiting (hit rate, time saved, steps wasted)',
      m.speculated ? `${(m.hitRate * 100).toFixed(0)}% of ${m.speculated}, ${ms(m.savedMs)} saved, ${m.wastedSteps} wasted` : 'none',
      'speculation',
    ],
    ['Decode ahead setting (auto: positions decoded ahead / waited, last decision)', speculationDecision(m), 'speculate'],
    ['Total', ms(m.totalMs), 'total'],
  ];
}
