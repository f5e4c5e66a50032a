/**
 * `bench fleet`: how many edges one shim serves. A sweep of fleet sizes (simulated edges, each its own
 * gRPC connection and one Route stream per generation, fleet-edges.ts) against one shim pinned to its
 * own core, with two kinds of backend (fleet-run.ts):
 *
 * - `fake`: the SGLang service fake (sglang-service-fake.ts: a modelled service time, a real prefix
 *   cache), so the rows show the shim's own cost: added latency, CPU per step, memory per session.
 * - `embedded`: the demo cloud pack inside the shim, once per `--max-batch` (1 and the shim's default 8, by default), so
 *   the rows show what batching steps of concurrent sessions into one forward pass gains. These rows are
 *   closed-loop by default (`--embedded-token-ms 0`: each edge sends its next routed step as soon as the
 *   last reply is in), so steps/s is the shim's capacity rather than the offered load.
 *
 * Per setup, the knee is the first fleet size whose p99 added latency exceeds twice the smallest size's
 * and 5 ms. `--json` prints one object last; `--plot FILE` writes steps/s and p99 added against fleet
 * size (log x), one line per setup, as SVG.
 *
 * @example
 * // bun run bench fleet --edges 1,8,64 --duration 5 --backend fake --json
 * await main(['--edges', '1,8,64', '--duration', '5', '--backend', 'fake', '--json']);
 */
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { ROUTE_BUDGET_BOUNDS } from '../../edge/request/generation-request.ts';
import { errorMessage } from '../../shared/errors.ts';
import { integerFlag, numberFlag, parseFlags, UsageError } from '../cli-support.ts';
import { lineChartsSvg } from '../eval/eval-plots.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { isCpuList } from './cpu-pinning.ts';
import { formatOverload, runOverloadBench, type OverloadOptions } from './fleet-overload.ts';
import { fleetKnees, runFleetBench, setupLabel, type FleetBackend, type FleetKnee, type FleetOptions, type FleetRow } from './fleet-run.ts';

export const USAGE = `bench fleet [--edges 1,4,16,64,128,256] [--duration S] [--backend fake,embedded] [--token-ms 25] [--share 0.1]
      [--span 1] [--gen-tokens 128] [--service-ms 2] [--slots N] [--max-batch 1,8] [--embedded-token-ms 0] [--shim-cpus 1]
      [--load-cpus 0] [--seed 1] [--plot FILE] [--json]
      N simulated edges (one gRPC connection each, one stream per generation) against one shim on its own
      core, to an SGLang fake and to the embedded model: steps/s, p50/p99 latency the shim adds, shim CPU
      per step, RSS per session, the knee; a plot of steps/s and p99 added against N. --slots gives the fake a
      capacity: at most N requests served at once, the rest queued in order (default: no limit)
bench fleet --overload F [--slots 2] [--service-ms 10] [--route-wait-ms MS] [--cloud-deadline-ms 2000] [--duration S]
      [--token-ms 25] [--share 0.1] [--span 1] [--gen-tokens 128] [--shim-cpus 1] [--load-cpus 0] [--seed 1] [--json]
      F × the cloud's measured capacity (the fake with --slots requests at once) offered by edges deciding with the
      real routing cut: fixed τ beside a wait budget (default twice the unloaded p99): wait p50/p99 per routed
      position against the unloaded p99, failed generations, realized share per edge, fallback tokens`;

export interface FleetResult {
  rows: FleetRow[];
  knee: Record<string, FleetKnee>;
  /** Per fleet size, embedded steps/s at the largest --max-batch over steps/s at --max-batch 1. */
  batching: { edges: number; max_batch: number; factor: number }[];
  settings: Omit<FleetOptions, 'log'> & { cores: number };
}

function batchingFactors(rows: FleetRow[]): FleetResult['batching'] {
  const embedded = rows.filter((r) => r.backend === 'embedded');
  const largest = Math.max(...embedded.map((r) => r.max_batch!));
  return embedded
    .filter((r) => r.max_batch === largest && largest > 1)
    .flatMap((r) => {
      const alone = embedded.find((a) => a.max_batch === 1 && a.edges === r.edges);
      return alone && alone.steps_per_s > 0
        ? [{ edges: r.edges, max_batch: largest, factor: Math.round((r.steps_per_s / alone.steps_per_s) * 100) / 100 }]
        : [];
    });
}

export function formatFleet(result: FleetResult): string {
  const s = result.settings;
  const ms = (x: number) => x.toFixed(2);
  const lines = [
    `fleet benchmark over loopback gRPC (${s.cores} cores; shim on CPUs ${s.shimCpus ?? 'any'}, edges and fake on ${s.loadCpus ?? 'any'})`,
    `  edges: ${s.pace.share} of tokens routed, ${s.pace.span} per step, ${s.pace.genTokens} tokens per generation; fake rows ${s.pace.tokenMs} ms per edge token, embedded rows ${s.embeddedTokenMs === 0 ? 'closed loop (token-ms 0)' : `${s.embeddedTokenMs} ms per edge token`}`,
    `  fake: decode step ${s.serviceMs} ms, prefill ${s.prefillMsPerToken} ms per uncached token, ${s.slots === undefined ? 'requests served concurrently' : `at most ${s.slots} requests served at once, the rest queued`}`,
    '',
    '| setup | edges | offered/s | steps/s | added p50 / p99 ms | in the shim p50 / p99 ms | round trip p50 / p99 ms | loop lag p99 (max) ms shim / load | errors | CPU ms/step shim / load | RSS KB/session | cached |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...result.rows.map(
      (r) =>
        `| ${setupLabel(r)} | ${r.edges} | ${r.offered_steps_per_s ?? 'closed loop'} | ${r.steps_per_s} | ${ms(r.p50_added_ms)} / ${ms(r.p99_added_ms)} | ${ms(r.p50_shim_ms)} / ${ms(r.p99_shim_ms)} | ${ms(r.p50_round_trip_ms)} / ${ms(r.p99_round_trip_ms)} | ${ms(r.shim_loop_lag_p99_ms)} (${ms(r.shim_loop_lag_max_ms)}) / ${ms(r.load_loop_lag_p99_ms)} (${ms(r.load_loop_lag_max_ms)}) | ${r.errors} | ${r.shim_cpu_ms_per_step.toFixed(3)} / ${r.load_cpu_ms_per_step.toFixed(3)} | ${r.rss_per_session_kb ?? '-'} | ${(r.cached_share * 100).toFixed(1)}% |`,
    ),
    '',
    ...Object.entries(result.knee).map(([label, k]) =>
      k.edges === null
        ? `knee (${label}): none up to ${Math.max(...s.edges)} edges (p99 added at the smallest: ${ms(k.base_p99_added_ms)} ms)`
        : `knee (${label}): ${k.edges} edges, p99 added ${ms(k.p99_added_ms!)} ms (${ms(k.base_p99_added_ms)} ms at the smallest)`,
    ),
    ...result.batching.map((b) => `batching factor at ${b.edges} edges (max-batch ${b.max_batch} / 1): ${b.factor.toFixed(2)}×`),
  ];
  for (const r of result.rows) for (const message of r.error_messages ?? []) lines.push(`  error (${setupLabel(r)}, ${r.edges} edges): ${message}`);
  return lines.join('\n');
}

/** Steps/s and p99 added against fleet size, one line per setup. */
export function fleetPlotSvg(rows: FleetRow[]): Promise<string> {
  const labels = [...new Set(rows.map(setupLabel))];
  const series = (y: (r: FleetRow) => number) =>
    labels.map((name) => ({ name, points: rows.filter((r) => setupLabel(r) === name).map((r) => ({ x: r.edges, y: y(r) })) }));
  return lineChartsSvg([
    { title: 'Routed steps served per second by one shim', xTitle: 'edges (log)', yTitle: 'steps/s', series: series((r) => r.steps_per_s), logX: true },
    {
      title: 'p99 latency the shim and the network add to a step',
      xTitle: 'edges (log)',
      yTitle: 'p99 added (ms)',
      series: series((r) => r.p99_added_ms),
      logX: true,
    },
  ]);
}

function integerList(values: Record<string, unknown>, name: string, fallback: number[], range: [number, number]): number[] {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const list = String(raw)
    .split(',')
    .map((v) => v.trim());
  const numbers = list.map(Number);
  if (list.some((v) => !/^\d+$/.test(v)) || numbers.some((n) => n < range[0] || n > range[1]))
    throw new UsageError(`--${name}: whole numbers from ${range[0]} to ${range[1]}, comma-separated, got ${JSON.stringify(raw)}`);
  return [...new Set(numbers)].sort((a, b) => a - b);
}

function cpuFlag(values: Record<string, unknown>, name: string, fallback: string): string {
  const v = (values[name] as string | undefined) ?? fallback;
  if (!isCpuList(v)) throw new UsageError(`--${name} must be a CPU list like "1", "0,2" or "2-3", got ${JSON.stringify(v)}`);
  return v;
}

export function parseFleetFlags(args: string[]): { options: Omit<FleetOptions, 'log'>; json: boolean; plot: string; overload: OverloadOptions | undefined } {
  const { values, positionals } = parseFlags(args, {
    edges: { type: 'string' },
    duration: { type: 'string' },
    backend: { type: 'string' },
    'token-ms': { type: 'string' },
    share: { type: 'string' },
    span: { type: 'string' },
    'gen-tokens': { type: 'string' },
    'service-ms': { type: 'string' },
    'prefill-ms-per-token': { type: 'string' },
    'max-batch': { type: 'string' },
    'embedded-token-ms': { type: 'string' },
    'shim-cpus': { type: 'string' },
    'load-cpus': { type: 'string' },
    seed: { type: 'string' },
    plot: { type: 'string' },
    json: { type: 'boolean' },
    overload: { type: 'string' },
    slots: { type: 'string' },
    'route-wait-ms': { type: 'string' },
    'cloud-deadline-ms': { type: 'string' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const backends = ((values.backend as string | undefined) ?? 'fake,embedded').split(',').map((b) => b.trim());
  for (const b of backends)
    if (b !== 'fake' && b !== 'embedded') throw new UsageError(`--backend: fake and/or embedded, comma-separated, got ${JSON.stringify(values.backend)}`);
  const share = numberFlag(values, 'share', 0.1, [0.001, 1])!;
  const options = {
    edges: integerList(values, 'edges', [1, 4, 16, 64, 128, 256], [1, 1024]),
    durationS: integerFlag(values, 'duration', 10, [1, 300])!,
    backends: [...new Set(backends)] as FleetBackend[],
    pace: {
      tokenMs: numberFlag(values, 'token-ms', 25, [0, 10_000])!,
      share,
      span: integerFlag(values, 'span', 1, [1, 64])!,
      genTokens: integerFlag(values, 'gen-tokens', 128, [1, 256])!,
    },
    embeddedTokenMs: numberFlag(values, 'embedded-token-ms', 0, [0, 10_000])!,
    maxBatches: integerList(values, 'max-batch', [1, 8], [1, 256]),
    serviceMs: numberFlag(values, 'service-ms', 2, [0, 10_000])!,
    slots: integerFlag(values, 'slots', undefined, [1, 100_000]),
    prefillMsPerToken: numberFlag(values, 'prefill-ms-per-token', 0.01, [0, 100])!,
    shimCpus: cpuFlag(values, 'shim-cpus', '1'),
    loadCpus: cpuFlag(values, 'load-cpus', '0'),
    seed: integerFlag(values, 'seed', 1, [0, 2 ** 31 - 1])!,
  };
  const factor = numberFlag(values, 'overload', undefined, [0.1, 20]);
  const overload: OverloadOptions | undefined =
    factor === undefined
      ? undefined
      : {
          factor,
          durationS: options.durationS,
          pace: options.pace,
          serviceMs: numberFlag(values, 'service-ms', 10, [0.1, 10_000])!,
          slots: integerFlag(values, 'slots', 2, [1, 1024])!,
          waitMs: integerFlag(values, 'route-wait-ms', undefined, [1, ROUTE_BUDGET_BOUNDS.maxWaitMs]),
          stepTimeoutMs: integerFlag(values, 'cloud-deadline-ms', 2_000, [1, 600_000])!,
          shimCpus: options.shimCpus,
          loadCpus: options.loadCpus,
          seed: options.seed,
        };
  return { options, json: values.json === true, plot: resolve((values.plot as string | undefined) ?? 'bench-fleet.svg'), overload };
}

export async function main(args: string[]): Promise<void> {
  const { options, json, plot, overload } = parseFleetFlags(args);
  await buildDemoPacks();
  if (overload) {
    const result = await runOverloadBench(overload, (line) => console.error(line));
    console.log(formatOverload(result, overload));
    if (json) console.log(JSON.stringify({ ...result, settings: { ...overload, cores: availableParallelism() } }));
    return;
  }
  const rows = await runFleetBench({ ...options, log: (line) => console.error(line) });
  const result: FleetResult = { rows, knee: fleetKnees(rows), batching: batchingFactors(rows), settings: { ...options, cores: availableParallelism() } };
  console.log(formatFleet(result));
  try {
    await Bun.write(plot, await fleetPlotSvg(rows));
    console.log(`plot: ${plot}`);
  } catch (e) {
    console.log(`plot: not written to ${plot}: ${errorMessage(e)}`);
  }
  if (json) console.log(JSON.stringify({ ...result, plot }));
}
