/**
 * `bench fleet`'s measurement: for each backend setup, one shim as a child process pinned to its own CPUs
 * (load-shim.ts), and a sweep of fleet sizes against it, each row a fresh set of simulated edges
 * (fleet-edges.ts) for a warm-up and then `durationS` seconds. The `fake` setup puts the shim in front
 * of the SGLang service fake (its own process, on the load generator's CPUs); the `embedded` setups run
 * the demo cloud pack inside the shim, once per `--max-batch`, closed-loop by default (see fleet.ts).
 *
 * @example
 * const result = await runFleetBench({ ...DEFAULT_FLEET_OPTIONS, edges: [1, 4], durationS: 2, log: console.error });
 * console.log(result.knee);
 */
import type { ShimConfig } from '../../cloud/config.ts';
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { DEMO } from '../../shared/paths.ts';
import { percentile, round } from '../../shared/statistics.ts';
import { pinThisProcess } from './cpu-pinning.ts';
import { fleetEdge, FleetTally, offeredStepsPerS, type EdgePace } from './fleet-edges.ts';
import { startIpcChild, stopIpcChild } from './ipc-child.ts';
import { ShimChild } from './load-shim-child.ts';
import { loadCorpus, type Corpus } from './load-workers.ts';
import { startLoopLagProbe } from './loop-lag.ts';
import type { SglangFakeOptions, SglangFakeReply } from './sglang-service-fake.ts';

export type FleetBackend = 'fake' | 'embedded';

export interface FleetOptions {
  edges: number[];
  durationS: number;
  backends: FleetBackend[];
  /** The fake rows' pace. */
  pace: EdgePace;
  /** The embedded rows' edge token time (0: closed loop); the rest of their pace is `pace`'s. */
  embeddedTokenMs: number;
  /** One embedded setup per value. */
  maxBatches: number[];
  /** The fake's decode step, and its prefill cost per uncached token. */
  serviceMs: number;
  prefillMsPerToken: number;
  /** The fake's capacity: most requests served at once (the rest wait in order); undefined = no limit. */
  slots?: number;
  /** taskset CPU lists: the shim's, and the load generator's and the fake's; no pinning when undefined. */
  shimCpus: string | undefined;
  loadCpus: string | undefined;
  seed: number;
  log: (line: string) => void;
}

export interface FleetRow {
  edges: number;
  backend: FleetBackend;
  /** The embedded backend's --max-batch; null for the fake. */
  max_batch: number | null;
  /** Steps/s the edges would send if replies were instant; null when closed-loop. */
  offered_steps_per_s: number | null;
  closed_loop: boolean;
  steps: number;
  steps_per_s: number;
  /** The edge's step round trip minus the backend time the shim reported: what the shim and the network add. */
  p50_added_ms: number;
  p99_added_ms: number;
  /** The shim's own time per step as it reports it: added latency without the network and the edges' event loop. */
  p50_shim_ms: number;
  p99_shim_ms: number;
  p50_round_trip_ms: number;
  p99_round_trip_ms: number;
  errors: number;
  generations: number;
  shim_cpu_ms_per_step: number;
  /** The same for this process (the edges' gRPC clients; the fake has its own process): is the load generator the limit? */
  load_cpu_ms_per_step: number;
  /**
   * How late this process's event loop ran a 2 ms timer over the measured window, p99 (loop-lag.ts): a
   * reply waits about as long before the edge sees it, and that wait counts in `p99_added_ms`.
   */
  load_loop_lag_p99_ms: number;
  /** The same in the shim's process: the larger p99 of the row's two halves (the shim reports its lag per stats call). */
  shim_loop_lag_p99_ms: number;
  /**
   * The longest each loop stalled over the window. Steps in flight during a stall all wait it out, so a stall
   * of a few milliseconds once a second (a garbage collection's pause) sets the p99 added where the p99 lag,
   * a share of time, stays low.
   */
  load_loop_lag_max_ms: number;
  shim_loop_lag_max_ms: number;
  /** Shim RSS mid-row minus its RSS before the row (after a GC), per session open then. */
  rss_per_session_kb: number | null;
  sessions_open: number;
  /** Cached tokens over context tokens sent, summed over the row's steps (a generation's first step has nearly none cached). */
  cached_share: number;
  /** Up to five distinct error messages, when there were errors. */
  error_messages?: string[];
}

export interface FleetKnee {
  /** First fleet size whose p99 added exceeds 2× the smallest size's and 5 ms; null when none does. */
  edges: number | null;
  p99_added_ms: number | null;
  base_p99_added_ms: number;
}

/** Tokens the fake's prefix cache holds (SGLang: its KV pool): 256 edges' live contexts several times over. */
const CACHE_TOKENS = 1 << 18;
const ORT_THREADS = 1;
const WARM_UP_EDGES = 8;

/** The label of a row's setup, as the knee, the table and the plot name it. */
export function setupLabel(row: Pick<FleetRow, 'backend' | 'max_batch'>): string {
  return row.backend === 'fake' ? 'fake' : `embedded max-batch ${row.max_batch}`;
}

/** Per setup, the knee of the p99 added latency over its rows (in the order of `rows`). */
export function fleetKnees(rows: FleetRow[]): Record<string, FleetKnee> {
  const knees: Record<string, FleetKnee> = {};
  for (const label of new Set(rows.map(setupLabel))) {
    const mine = rows.filter((r) => setupLabel(r) === label).sort((a, b) => a.edges - b.edges);
    const base = mine[0]!.p99_added_ms;
    const knee = mine.find((r) => r.p99_added_ms > 2 * base && r.p99_added_ms > 5);
    knees[label] = { edges: knee?.edges ?? null, p99_added_ms: knee?.p99_added_ms ?? null, base_p99_added_ms: base };
  }
  return knees;
}

export async function runFleetBench(o: FleetOptions): Promise<FleetRow[]> {
  if (o.loadCpus !== undefined) pinThisProcess(o.loadCpus);
  const corpus = await loadCorpus(DEMO.cloudPack);
  const pack = loadModelPack(DEMO.cloudPack);
  const rows: FleetRow[] = [];
  const maxEdges = Math.max(...o.edges);
  // Closing a stream frees its session a moment later: room for a second fleet's worth meanwhile.
  // As many backend calls at once as sessions: the sweep measures the shim, not its admission control (--overload does).
  const sessions = { maxSessions: 2 * maxEdges + 8, maxInflightSteps: 2 * maxEdges + 8, threads: ORT_THREADS, modelPack: DEMO.cloudPack };
  for (const backend of o.backends) {
    if (backend === 'fake') {
      const fakeOptions: SglangFakeOptions = {
        vocabSize: pack.vocabSize,
        maxContext: pack.maxPositions,
        serviceMs: o.serviceMs,
        prefillMsPerToken: o.prefillMsPerToken,
        cacheTokens: CACHE_TOKENS,
        ...(o.slots === undefined ? {} : { slots: o.slots }),
      };
      const { child, ready } = await startIpcChild<SglangFakeReply>({
        script: new URL('./sglang-service-fake.ts', import.meta.url).pathname,
        options: fakeOptions,
        name: 'the SGLang fake',
      });
      try {
        o.log(`fake: SGLang service fake at ${ready.url} (decode step ${o.serviceMs} ms, prefill ${o.prefillMsPerToken} ms per uncached token)`);
        const config: Partial<ShimConfig> = { ...sessions, backend: 'sglang', backendUrl: ready.url };
        rows.push(...(await sweep(o, corpus, config, { backend, max_batch: null }, o.pace)));
      } finally {
        await stopIpcChild(child);
      }
    } else {
      for (const maxBatch of o.maxBatches) {
        const config: Partial<ShimConfig> = { ...sessions, maxLiveSequences: 2 * maxEdges + 8, maxBatch };
        rows.push(...(await sweep(o, corpus, config, { backend, max_batch: maxBatch }, { ...o.pace, tokenMs: o.embeddedTokenMs })));
      }
    }
  }
  return rows;
}

/** One setup: a shim, and one row per fleet size against it. */
async function sweep(
  o: FleetOptions,
  corpus: Corpus,
  config: Partial<ShimConfig>,
  setup: Pick<FleetRow, 'backend' | 'max_batch'>,
  pace: EdgePace,
): Promise<FleetRow[]> {
  const { shim, address } = await ShimChild.start(config, { cpus: o.shimCpus });
  const clients: GrpcCloudClient[] = [];
  try {
    for (let i = 0; i < Math.max(...o.edges); i++) clients.push(new GrpcCloudClient({ address, ownConnection: true }));
    // A closed-loop second of a few edges first, uncounted: the shim's hot paths compiled, its arenas grown.
    const warmUp = new FleetTally();
    const now = performance.now();
    const warmRun = { pace: { ...pace, tokenMs: 0 }, seed: o.seed + 1, measureFrom: now, deadline: now + 1_000 };
    await Promise.all(clients.slice(0, WARM_UP_EDGES).map((client, i) => fleetEdge(client, corpus, i, warmRun, warmUp)));
    if (warmUp.errors) throw new AppError('UNAVAILABLE', `${setupLabel(setup)}: the warm-up failed: ${[...warmUp.messages].join('; ')}`);
    const rows: FleetRow[] = [];
    for (const edges of o.edges) {
      const row = await measureRow(o, corpus, shim, clients.slice(0, edges), setup, pace);
      o.log(`${setupLabel(row)}, ${edges} edges: ${row.steps_per_s} steps/s, p99 added ${row.p99_added_ms} ms, ${row.errors} errors`);
      rows.push(row);
    }
    return rows;
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
    await shim.stop();
  }
}

async function measureRow(
  o: FleetOptions,
  corpus: Corpus,
  shim: ShimChild,
  clients: GrpcCloudClient[],
  setup: Pick<FleetRow, 'backend' | 'max_batch'>,
  pace: EdgePace,
): Promise<FleetRow> {
  const idle = await shim.stats();
  // A short warm-up: connections open and every edge past its staggered start before counting.
  const warmUpMs = Math.min(1_000, o.durationS * 250);
  const measureFrom = performance.now() + warmUpMs;
  const deadline = measureFrom + o.durationS * 1000;
  const tally = new FleetTally();
  const run = { pace, seed: o.seed, measureFrom, deadline };
  const edges = Promise.all(clients.map((client, i) => fleetEdge(client, corpus, i, run, tally)));
  await Bun.sleep(warmUpMs);
  const start = await shim.stats({ collect: false });
  const loadStart = process.cpuUsage();
  const loopLag = startLoopLagProbe();
  await Bun.sleep((o.durationS * 1000) / 2);
  const loaded = await shim.stats({ collect: false });
  await edges;
  const loadLag = loopLag.stop();
  const loadCpu = process.cpuUsage(loadStart);
  const end = await shim.stats({ collect: false });
  return {
    edges: clients.length,
    ...setup,
    offered_steps_per_s: offeredStepsPerS(clients.length, pace) === null ? null : round(offeredStepsPerS(clients.length, pace)!, 1),
    closed_loop: pace.tokenMs === 0,
    steps: tally.steps,
    steps_per_s: round(tally.steps / o.durationS, 1),
    p50_added_ms: round(percentile(tally.addedMs, 50)),
    p99_added_ms: round(percentile(tally.addedMs, 99)),
    p50_shim_ms: round(percentile(tally.shimMs, 50)),
    p99_shim_ms: round(percentile(tally.shimMs, 99)),
    p50_round_trip_ms: round(percentile(tally.roundTripMs, 50)),
    p99_round_trip_ms: round(percentile(tally.roundTripMs, 99)),
    errors: tally.errors,
    generations: tally.generations,
    shim_cpu_ms_per_step: tally.steps ? round((end.cpuMs - start.cpuMs) / tally.steps) : 0,
    load_cpu_ms_per_step: tally.steps ? round((loadCpu.user + loadCpu.system) / 1000 / tally.steps) : 0,
    load_loop_lag_p99_ms: round(loadLag.p99Ms),
    shim_loop_lag_p99_ms: round(Math.max(loaded.loopLagP99Ms, end.loopLagP99Ms)),
    load_loop_lag_max_ms: round(loadLag.maxMs),
    shim_loop_lag_max_ms: round(Math.max(loaded.loopLagMaxMs, end.loopLagMaxMs)),
    rss_per_session_kb: loaded.sessions ? round(((loaded.rssMb - idle.rssMb) * 1024) / loaded.sessions, 1) : null,
    sessions_open: loaded.sessions,
    cached_share: tally.contextTokens ? round(tally.cachedTokens / tally.contextTokens) : 0,
    ...(tally.messages.size ? { error_messages: [...tally.messages] } : {}),
  };
}
