/**
 * `bench latency`'s figures: one row per routing setting, each the mean over the prompts of the decoding
 * loop's own final metrics and of what the cloud's replies report, and the Markdown table.
 *
 * @example
 * console.log(formatLatencyTable(await runLatencyBench(options)));
 */
import type { GenerationMetrics } from '../../edge/loop/generation-metrics.ts';
import type { Mode } from '../../edge/request/generation-request.ts';
import { mean, percentile } from '../../shared/statistics.ts';
import { latencyFloor, type LatencyFloor } from './latency-floor.ts';

/** One routing setting: means per prompt unless the name says otherwise. */
export interface LatencyRow extends LatencyFloor {
  mode: Mode;
  /** τ of a joint row; null for small_only and llm_only. */
  threshold: number | null;
  /** Speculative continuation on (joint rows only: the other modes never speculate). */
  speculate: boolean;
  /** The wait budget a joint row ran under (route_wait_ms); null for fixed τ and the other modes. */
  route_wait_ms: number | null;
  /** A joint row whose conversation opened with the request, the prompt sent ahead (--cloud-prefill eager). */
  prefill_ahead: boolean;
  tokens: number;
  routed_count: number;
  /** Routed tokens / generated tokens, over all prompts. */
  routed_ratio: number;
  cloud_calls: number;
  /** Routed tokens the cloud failed to serve, summed over prompts (should be 0). */
  fallback_total: number;
  slm_ms: number;
  router_ms: number;
  ttft_ms: number;
  /** Mean over prompts of each prompt's mean edge-side time between tokens (cloud waiting excluded). */
  tbt_ms: number;
  /** Mean over prompts of each prompt's median edge-side time between tokens. */
  tbt_p50_ms: number;
  /** tbt_ms / small_only's tbt_ms; null for llm_only, where the edge model does not run. */
  tbt_ratio: number | null;
  comm_llm_ms: number;
  /** Per-token cloud wait over every token of every prompt (a routed step's wait; 0 for a token that did not route). */
  wait_p50_ms: number;
  wait_p99_ms: number;
  wait_max_ms: number;
  /** Backend compute time reported by the shim with each reply. */
  backend_ms: number;
  /** cloud_calls × RTT + backend_ms. */
  predicted_comm_llm_ms: number;
  /** (comm_llm_ms − predicted_comm_llm_ms) / cloud_calls; null without calls. */
  residual_per_call_ms: number | null;
  total_ms: number;
  /** The whole request, as total_ms, and its ratio to small_only's. */
  overall_ms: number;
  overall_ratio: number;
  /** Routed tokens whose speculative guess was right / routed tokens speculated past, over all prompts; null when none. */
  hit_rate: number | null;
  /** Speculative edge steps thrown away, and their edge time (means per prompt). */
  wasted_steps: number;
  wasted_ms: number;
  /** Edge time of kept speculative steps: decoding done during the wait (mean per prompt). */
  saved_ms: number;
  /** Steps sent while another was in flight, assuming its guess (mean per prompt; skipped ones included). */
  conditional_steps: number;
}

export interface LatencyBenchResult {
  rtt_ms: number;
  prompts: number;
  max_new_tokens: number;
  /** Tokens each routed step asks the cloud for. */
  route_span: number;
  /** Where the edge's and the shim's forward passes ran (--model-thread); absent from recordings made before the flag. */
  model_thread?: string;
  dataset: string;
  slm: string;
  router: string;
  cloud: string;
  rows: LatencyRow[];
  /** True when, for every prompt and τ, the joint tokens with and without speculation and prefill ahead are the same; null unless a pair ran. */
  identical_outputs: boolean | null;
}

/** What the cloud did for one generation, as the replies report it. */
export interface CloudTally {
  calls: number;
  backendMs: number;
  /** Each call's backend time, in order. */
  stepBackendMs: number[];
  /** Each call's time at the shim, its backend's included (the reply's backend_ms + shim_ms), in order. */
  stepCloudMs: number[];
}

/** One routing setting of the table. */
export interface Setting {
  mode: Mode;
  threshold: number | null;
  speculate: boolean;
  /** A joint row's wait budget; null: fixed τ. */
  routeWaitMs: number | null;
  /** The prompt sent ahead to the cloud (joint rows only). */
  prefillAhead?: boolean;
}

export interface PromptRun {
  /** The generated token ids, to compare settings that must agree. */
  ids: number[];
  /** Each token's cloud wait (TokenEvent.timings.cloudMs): 0 for a token that did not route. */
  waits: number[];
  metrics: GenerationMetrics;
  cloud: CloudTally;
  /** Why the cloud failed a routed token, the first time it did. */
  cloudError: string | undefined;
  /** The cloud wait of the first routed token; null when nothing routed. */
  firstRoutedWaitMs: number | null;
}

/** A setting's row from its runs (one per prompt); the ratios to small_only are filled in by the caller. */
export function summarize(setting: Setting, runs: PromptRun[], rttMs: number): LatencyRow {
  const m = (f: (r: PromptRun) => number) => mean(runs.map(f));
  const tokens = runs.reduce((s, r) => s + r.metrics.tokens, 0);
  const routed = runs.reduce((s, r) => s + r.metrics.routed, 0);
  const calls = runs.reduce((s, r) => s + r.cloud.calls, 0);
  const comm = m((r) => r.metrics.cloudMs);
  const predicted = m((r) => r.cloud.calls * rttMs + r.cloud.backendMs);
  const speculated = runs.reduce((s, r) => s + r.metrics.speculated, 0);
  const hits = runs.reduce((s, r) => s + r.metrics.speculationHits, 0);
  const waits = runs.flatMap((r) => r.waits);
  return {
    mode: setting.mode,
    threshold: setting.threshold,
    speculate: setting.speculate,
    route_wait_ms: setting.routeWaitMs,
    prefill_ahead: setting.prefillAhead === true,
    ...latencyFloor(
      runs.map((r) => ({
        firstRoutedWaitMs: r.firstRoutedWaitMs,
        stepBackendMs: r.cloud.stepBackendMs,
        stepCloudMs: r.cloud.stepCloudMs,
        wastedMs: r.metrics.wastedMs,
      })),
      rttMs,
    ),
    tokens: m((r) => r.metrics.tokens),
    routed_count: m((r) => r.metrics.routed),
    routed_ratio: tokens ? routed / tokens : 0,
    cloud_calls: m((r) => r.cloud.calls),
    fallback_total: runs.reduce((s, r) => s + r.metrics.fallback, 0),
    slm_ms: m((r) => r.metrics.slmMs),
    router_ms: m((r) => r.metrics.routerMs),
    ttft_ms: m((r) => r.metrics.ttftMs),
    tbt_ms: m((r) => r.metrics.tbtMeanMs),
    tbt_p50_ms: m((r) => r.metrics.tbtP50Ms),
    tbt_ratio: null,
    comm_llm_ms: comm,
    wait_p50_ms: percentile(waits, 50),
    wait_p99_ms: percentile(waits, 99),
    wait_max_ms: waits.reduce((a, b) => Math.max(a, b), 0),
    backend_ms: m((r) => r.cloud.backendMs),
    predicted_comm_llm_ms: predicted,
    residual_per_call_ms: calls ? ((comm - predicted) * runs.length) / calls : null,
    total_ms: m((r) => r.metrics.totalMs),
    overall_ms: m((r) => r.metrics.totalMs),
    overall_ratio: 1,
    hit_rate: speculated ? hits / speculated : null,
    wasted_steps: m((r) => r.metrics.wastedSteps),
    wasted_ms: m((r) => r.metrics.wastedMs),
    saved_ms: m((r) => r.metrics.savedMs),
    conditional_steps: m((r) => r.metrics.conditionalSteps),
  };
}

/** Whether every prompt's joint tokens match between each row with speculation or prefill ahead and the row without either at its τ. */
export function identicalOutputs(settings: Setting[], runs: PromptRun[][]): boolean | null {
  let compared = false;
  for (const [s, setting] of settings.entries()) {
    if (setting.mode !== 'joint' || (!setting.speculate && !setting.prefillAhead)) continue;
    const t = settings.findIndex(
      (x) => x.mode === 'joint' && x.threshold === setting.threshold && x.routeWaitMs === setting.routeWaitMs && !x.speculate && !x.prefillAhead,
    );
    if (t < 0) continue;
    compared = true;
    for (const [p, run] of runs[s]!.entries()) if (run.ids.join(',') !== runs[t]![p]!.ids.join(',')) return false;
  }
  return compared ? true : null;
}

export function label(s: {
  mode: Mode;
  threshold: number | null;
  speculate: boolean;
  routeWaitMs?: number | null;
  route_wait_ms?: number | null;
  prefillAhead?: boolean;
  prefill_ahead?: boolean;
}): string {
  const wait = s.routeWaitMs ?? s.route_wait_ms ?? null;
  const ahead = (s.prefillAhead ?? s.prefill_ahead) === true;
  return s.mode === 'joint' ? `joint τ=${s.threshold}${wait === null ? '' : ` wait≤${wait}`}${s.speculate ? ' spec' : ''}${ahead ? ' ahead' : ''}` : s.mode;
}

/** The result as a Markdown table with a line saying what was measured. */
export function formatLatencyTable(r: LatencyBenchResult): string {
  const ms = (x: number) => x.toFixed(1);
  const header = [
    'setting',
    'routed',
    'routed %',
    'tokens',
    'edge model (ms)',
    'TTFT (ms)',
    'TBT edge (ms)',
    'TBT / small_only',
    'comm + cloud model (ms)',
    'wait p50 / p99 / max (ms)',
    'predicted (ms)',
    'residual / call (ms)',
    'overall (ms)',
    'overall / small_only',
    'hit rate',
    'wasted steps',
    'conditional steps',
    'first routed wait / of it held (ms)',
    'extra over small_only (ms)',
    'of it: cloud prefill / tail / re-decode (ms)',
  ];
  const rows = r.rows.map((row) => [
    label(row),
    row.routed_count.toFixed(1),
    (100 * row.routed_ratio).toFixed(1),
    row.tokens.toFixed(1),
    ms(row.slm_ms),
    ms(row.ttft_ms),
    row.tbt_ms.toFixed(3),
    row.tbt_ratio === null ? '–' : row.tbt_ratio.toFixed(2),
    ms(row.comm_llm_ms),
    `${ms(row.wait_p50_ms)} / ${ms(row.wait_p99_ms)} / ${ms(row.wait_max_ms)}`,
    ms(row.predicted_comm_llm_ms),
    row.residual_per_call_ms === null ? '–' : row.residual_per_call_ms.toFixed(2),
    ms(row.total_ms),
    row.overall_ratio.toFixed(2),
    row.hit_rate === null ? '–' : row.hit_rate.toFixed(2),
    row.wasted_steps.toFixed(1),
    row.conditional_steps.toFixed(1),
    row.first_wait_ms === null ? '–' : `${ms(row.first_wait_ms)} / ${ms(row.held_ms)}`,
    ms(row.extra_ms),
    `${ms(row.prefill_critical_ms)} / ${ms(row.tail_ms)} / ${ms(row.redecode_ms)}`,
  ]);
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    `${r.prompts} prompts from ${r.dataset}, up to ${r.max_new_tokens} new tokens (greedy), RTT ${r.rtt_ms} ms injected${r.route_span > 1 ? `, route span ${r.route_span}` : ''}; edge ${r.slm}, router ${r.router}, cloud: ${r.cloud}${r.model_thread ? `, forward passes on the ${r.model_thread} thread` : ''}. Means per prompt; predicted = cloud calls × RTT + backend compute; wait = each token's cloud wait over all prompts (0 when not routed).`,
    '',
    line(header),
    line(header.map((_, i) => (i === 0 ? '---' : '---:'))),
    ...rows.map(line),
    ...(r.identical_outputs === null ? [] : ['', `identical outputs with and without speculation and prefill ahead: ${r.identical_outputs}`]),
  ].join('\n');
}
