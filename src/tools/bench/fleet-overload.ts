/**
 * `bench fleet --overload F`: more edges than the cloud can serve. The cloud is the SGLang service fake
 * with a real capacity (`--slots` requests at once, `--service-ms` each, FIFO beyond) behind one shim
 * whose admission control matches it (`max_inflight_steps` = slots), so a step that cannot start within
 * its deadline is refused as overloaded. Then:
 *
 * 1. capacity: closed-loop edges, as many steps/s as the cloud serves;
 * 2. unloaded: a quarter of that offered, fixed τ: the p99 wait the budgets are compared with;
 * 3. overloaded: F × capacity offered, once per policy: fixed τ (the pace's share of uniform scores) and a
 *    wait budget (`--route-wait-ms`, by default twice the unloaded p99), each edge deciding with the real
 *    routing cut (overload-edges.ts).
 *
 * Each row: the wait of a routed position p50/p99, failed generations, the realized routed share (all
 * edges, and the lowest and highest edge), fallback tokens (refused and failed steps), steps served/s.
 *
 * @example
 * const result = await runOverloadBench({ ...options, factor: 2 }, console.error);
 * result.rows.find((r) => r.policy === 'wait-budget')!.p99_wait_ms;
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
import { overloadEdge, OverloadTally, type OverloadPolicy } from './overload-edges.ts';
import type { SglangFakeOptions, SglangFakeReply } from './sglang-service-fake.ts';

export interface OverloadOptions {
  /** Offered load as a multiple of the measured capacity. */
  factor: number;
  durationS: number;
  pace: EdgePace;
  /** The fake's decode step per token, and requests it serves at once. */
  serviceMs: number;
  slots: number;
  /** The wait budget; undefined = twice the unloaded p99, rounded up. */
  waitMs: number | undefined;
  /** The edges' own step deadline (their --cloud-deadline-ms). */
  stepTimeoutMs: number;
  shimCpus: string | undefined;
  loadCpus: string | undefined;
  seed: number;
}

export interface OverloadRow {
  policy: 'threshold' | 'wait-budget';
  /** `unloaded` (a quarter of capacity offered) or `overloaded` (factor × capacity). */
  load: 'unloaded' | 'overloaded';
  edges: number;
  offered_steps_per_s: number;
  capacity_steps_per_s: number;
  steps_per_s: number;
  wait_budget_ms: number | null;
  p50_wait_ms: number;
  p99_wait_ms: number;
  unloaded_p99_wait_ms: number;
  /** p99 wait over the unloaded p99; a wait budget should keep it ≤ 3 at twice the cloud's capacity (docs/routing-budgets.md). */
  p99_over_unloaded: number;
  generations: number;
  failed_generations: number;
  /** Cloud tokens over all tokens, over every edge; then the lowest and highest edge's. */
  realized_share: number;
  realized_share_min: number;
  realized_share_max: number;
  fallback_tokens: number;
  overloaded_steps: number;
  /** Steps past the wait budget, decided on the edge (not failures: the budget's own deadline). */
  late_steps: number;
  failed_steps: number;
  error_messages?: string[];
}

export interface OverloadResult {
  capacity_steps_per_s: number;
  rows: OverloadRow[];
}

const CAPACITY_SECONDS = 3;

export async function runOverloadBench(o: OverloadOptions, log: (line: string) => void): Promise<OverloadResult> {
  if (o.loadCpus !== undefined) pinThisProcess(o.loadCpus);
  const corpus = await loadCorpus(DEMO.cloudPack);
  const pack = loadModelPack(DEMO.cloudPack);
  const fakeOptions: SglangFakeOptions = {
    vocabSize: pack.vocabSize,
    maxContext: pack.maxPositions,
    serviceMs: o.serviceMs,
    prefillMsPerToken: 0.01,
    cacheTokens: 1 << 18,
    slots: o.slots,
  };
  const { child, ready } = await startIpcChild<SglangFakeReply>({
    script: new URL('./sglang-service-fake.ts', import.meta.url).pathname,
    options: fakeOptions,
    name: 'the SGLang fake',
  });
  const perEdge = offeredStepsPerS(1, o.pace);
  if (perEdge === null) throw new AppError('INVALID_ARGUMENT', '--overload needs an edge pace (--token-ms above 0)');
  try {
    const maxEdges = 1024;
    const config: Partial<ShimConfig> = { backend: 'sglang', backendUrl: ready.url, maxSessions: 2 * maxEdges + 8, maxInflightSteps: o.slots };
    const { shim, address } = await ShimChild.start(config, { cpus: o.shimCpus });
    try {
      const capacity = await measureCapacity(address, corpus, o);
      log(`overload: the fake serves ${capacity} steps/s (${o.slots} slots of ${o.serviceMs} ms)`);
      const unloadedEdges = Math.max(1, Math.round((0.25 * capacity) / perEdge));
      const loadedEdges = Math.min(maxEdges, Math.ceil((o.factor * capacity) / perEdge));
      const unloaded = await measureRow(address, corpus, o, { name: 'threshold' }, unloadedEdges, 'unloaded', capacity, perEdge, null);
      log(`overload: unloaded (${unloadedEdges} edges): p99 wait ${unloaded.p99_wait_ms} ms`);
      const waitMs = o.waitMs ?? Math.ceil(2 * unloaded.p99_wait_ms);
      const rows = [unloaded];
      for (const policy of [{ name: 'threshold' }, { name: 'wait-budget', waitMs }] as OverloadPolicy[]) {
        const row = await measureRow(address, corpus, o, policy, loadedEdges, 'overloaded', capacity, perEdge, unloaded.p99_wait_ms);
        log(
          `overload: ${policy.name} (${loadedEdges} edges): p99 wait ${row.p99_wait_ms} ms, ${row.failed_generations} failed generations, share ${row.realized_share}`,
        );
        rows.push(row);
      }
      return { capacity_steps_per_s: capacity, rows };
    } finally {
      await shim.stop();
    }
  } finally {
    await stopIpcChild(child);
  }
}

/** Closed-loop edges, four per slot: the steps/s the cloud serves flat out. */
async function measureCapacity(address: string, corpus: Corpus, o: OverloadOptions): Promise<number> {
  const clients = Array.from({ length: 4 * o.slots }, () => new GrpcCloudClient({ address, ownConnection: true, stepTimeoutMs: 10_000 }));
  try {
    const tally = new FleetTally();
    const now = performance.now();
    const measureFrom = now + 500;
    const run = { pace: { ...o.pace, tokenMs: 0 }, seed: o.seed + 1, measureFrom, deadline: measureFrom + CAPACITY_SECONDS * 1000 };
    await Promise.all(clients.map((client, i) => fleetEdge(client, corpus, i, run, tally)));
    if (tally.errors) throw new AppError('UNAVAILABLE', `measuring capacity failed: ${[...tally.messages].join('; ')}`);
    return round(tally.steps / CAPACITY_SECONDS, 1);
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
  }
}

async function measureRow(
  address: string,
  corpus: Corpus,
  o: OverloadOptions,
  policy: OverloadPolicy,
  edges: number,
  load: OverloadRow['load'],
  capacity: number,
  perEdge: number,
  unloadedP99: number | null,
): Promise<OverloadRow> {
  // Fresh clients per row: each edge's breaker starts closed.
  const clients = Array.from({ length: edges }, () => new GrpcCloudClient({ address, ownConnection: true, stepTimeoutMs: o.stepTimeoutMs }));
  try {
    const tally = new OverloadTally();
    const measureFrom = performance.now() + 2_000;
    const run = { pace: o.pace, policy, seed: o.seed, measureFrom, deadline: measureFrom + o.durationS * 1000 };
    await Promise.all(clients.map((client, i) => overloadEdge(client, corpus, i, run, tally)));
    const shares = [...tally.perEdge.values()].filter((e) => e.tokens > 0).map((e) => e.cloud / e.tokens);
    const tokens = [...tally.perEdge.values()].reduce((sum, e) => sum + e.tokens, 0);
    const cloud = [...tally.perEdge.values()].reduce((sum, e) => sum + e.cloud, 0);
    const p99 = round(percentile(tally.waitMs, 99));
    const baseline = unloadedP99 ?? p99;
    return {
      policy: policy.name,
      load,
      edges,
      offered_steps_per_s: round(edges * perEdge, 1),
      capacity_steps_per_s: capacity,
      steps_per_s: round(tally.served / o.durationS, 1),
      wait_budget_ms: policy.waitMs ?? null,
      p50_wait_ms: round(percentile(tally.waitMs, 50)),
      p99_wait_ms: p99,
      unloaded_p99_wait_ms: baseline,
      p99_over_unloaded: baseline > 0 ? round(p99 / baseline, 2) : 0,
      generations: tally.generations,
      failed_generations: tally.failedGenerations,
      realized_share: tokens ? round(cloud / tokens, 4) : 0,
      realized_share_min: shares.length ? round(Math.min(...shares), 4) : 0,
      realized_share_max: shares.length ? round(Math.max(...shares), 4) : 0,
      fallback_tokens: tally.overloaded + tally.late + tally.failed,
      overloaded_steps: tally.overloaded,
      late_steps: tally.late,
      failed_steps: tally.failed,
      ...(tally.messages.size ? { error_messages: [...tally.messages] } : {}),
    };
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
  }
}

export function formatOverload(result: OverloadResult, o: OverloadOptions): string {
  const ms = (x: number) => x.toFixed(1);
  return [
    `overload: the fake serves ${result.capacity_steps_per_s} steps/s (${o.slots} slots of ${o.serviceMs} ms); edges route ${o.pace.share} of uniform scores, ${o.pace.tokenMs} ms per edge token; the edges' step deadline ${o.stepTimeoutMs} ms`,
    '',
    '| policy | load | edges | offered/s | served/s | wait budget ms | wait p50 / p99 ms | p99 / unloaded p99 | failed generations | realized share (min–max per edge) | fallback tokens (overloaded / late / failed) |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...result.rows.map(
      (r) =>
        `| ${r.policy} | ${r.load} | ${r.edges} | ${r.offered_steps_per_s} | ${r.steps_per_s} | ${r.wait_budget_ms ?? '-'} | ${ms(r.p50_wait_ms)} / ${ms(r.p99_wait_ms)} | ${r.p99_over_unloaded.toFixed(2)}× | ${r.failed_generations} of ${r.generations} | ${r.realized_share} (${r.realized_share_min}–${r.realized_share_max}) | ${r.fallback_tokens} (${r.overloaded_steps} / ${r.late_steps} / ${r.failed_steps}) |`,
    ),
    ...result.rows.flatMap((r) => (r.error_messages ?? []).map((m) => `  error (${r.policy}, ${r.load}): ${m}`)),
  ].join('\n');
}
