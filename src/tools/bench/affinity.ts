/**
 * `bench affinity`: does each generation stay on the SGLang worker that holds its prefix? One shim in
 * front of several SGLang workers (the service fake of `bench fleet`, each its own process with its own
 * prefix cache) behind nginx with the shipped deploy/nginx-sglang-affinity.conf, which hashes the
 * `X-SMG-Routing-Key` header the shim sends as sgl-model-gateway's `consistent_hashing` policy does.
 * Simulated edges (fleet-edges.ts) play generations against the shim; nginx's access log says which
 * worker served each `/generate` and under which key (one key per generation: its request id).
 *
 * Two arms, each on fresh workers (empty caches): `key`, the shipped configuration; `no key`, the same
 * file without its `hash` line, which is what nginx does with requests that carry no key (an empty key
 * falls back to round robin). Per arm: the share of steps served by the worker that served their
 * generation's first step, the share of generations that never left it, cached tokens over context
 * (all steps, and the steps after a generation's first, whose prompt no cache can have seen), and the
 * tokens the workers prefilled per step.
 *
 * @example
 * // bun run bench affinity --workers 2 --edges 32 --duration 10 --json
 * await main(['--workers', '2', '--edges', '32', '--duration', '10', '--json']);
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { DEMO } from '../../shared/paths.ts';
import { percentile, round } from '../../shared/statistics.ts';
import { integerFlag, numberFlag, parseFlags, UsageError } from '../cli-support.ts';
import { SGLANG_AFFINITY_CONFIG } from '../fleet/nginx-config.ts';
import { NginxProcess } from '../fleet/nginx-process.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { fleetEdge, FleetTally, type EdgePace } from './fleet-edges.ts';
import { startIpcChild, stopIpcChild, type IpcChild } from './ipc-child.ts';
import { ShimChild } from './load-shim-child.ts';
import { loadCorpus, type Corpus } from './load-workers.ts';
import type { SglangFakeOptions, SglangFakeReply } from './sglang-service-fake.ts';

export const USAGE = `bench affinity [--workers 2] [--edges 32] [--duration S] [--token-ms 25] [--share 0.1] [--gen-tokens 128]
      [--service-ms 2] [--seed 1] [--json]
      one shim → nginx hashing X-SMG-Routing-Key (deploy/nginx-sglang-affinity.conf) → W SGLang fakes, with the
      key and without it (round robin): steps on the worker of their generation's first step, cached tokens`;

export type AffinityArm = 'key' | 'no key';

export interface AffinityOptions {
  workers: number;
  edges: number;
  durationS: number;
  pace: EdgePace;
  serviceMs: number;
  seed: number;
  log: (line: string) => void;
}

export interface AffinityRow {
  arm: AffinityArm;
  workers: number;
  edges: number;
  /** `/generate` requests nginx forwarded, and the generations (routing keys) they belonged to. */
  steps: number;
  generations: number;
  /** Steps served by the worker that served their generation's first step, over all steps. */
  steps_on_first_worker: number;
  /** Generations whose steps all went to one worker. */
  generations_on_one_worker: number;
  /** Steps per worker, in the order of the upstream list. */
  steps_per_worker: number[];
  /** Cached tokens over context tokens: over every step, and over the steps after each generation's first. */
  cached_share: number;
  follow_up_cached_share: number;
  /** Context tokens the workers had to compute (not cached), per step. */
  prefilled_tokens_per_step: number;
  p50_round_trip_ms: number;
  p99_round_trip_ms: number;
  errors: number;
  error_messages?: string[];
}

/** Tokens each worker's prefix cache holds: every generation of the run fits. */
const CACHE_TOKENS = 1 << 18;
/** The fake's prefill cost per uncached token, as in `bench fleet`. */
const PREFILL_MS_PER_TOKEN = 0.01;
/** One line of the shipped access log format: the key nginx hashed and the worker(s) it tried. */
const ACCESS_LINE = /"POST \/generate [^"]*" (\d+) key="([^"]*)" upstream=(.+?) request_time=/;

/** The shipped configuration without its `hash` line: what nginx does with requests that carry no key. */
export function withoutKeyHash(config: string): string {
  const edited = config.replace(/^\s*hash \$http_x_smg_routing_key consistent;\s*$/m, '');
  if (edited === config) throw new AppError('FAILED_PRECONDITION', `${SGLANG_AFFINITY_CONFIG} has no "hash $http_x_smg_routing_key consistent;" line`);
  return edited;
}

/** Per routing key, the workers that served its `/generate` steps, in order, from nginx's access log. */
export function stepsByKey(accessLog: string): Map<string, string[]> {
  const byKey = new Map<string, string[]>();
  for (const line of accessLog.split('\n')) {
    const match = ACCESS_LINE.exec(line);
    if (!match || match[1] !== '200') continue;
    // After a retry nginx lists every worker it tried: the last one served the step.
    const worker = match[3]!.split(',').at(-1)!.trim();
    const steps = byKey.get(match[2]!) ?? [];
    steps.push(worker);
    byKey.set(match[2]!, steps);
  }
  return byKey;
}

/** The affinity figures of an access log: steps and generations that stayed on their first worker. */
export function affinityOf(
  byKey: Map<string, string[]>,
  workers: readonly string[],
): Pick<AffinityRow, 'steps' | 'generations' | 'steps_on_first_worker' | 'generations_on_one_worker' | 'steps_per_worker'> {
  let steps = 0;
  let onFirst = 0;
  let onOne = 0;
  const perWorker = workers.map(() => 0);
  for (const served of byKey.values()) {
    steps += served.length;
    onFirst += served.filter((w) => w === served[0]).length;
    if (served.every((w) => w === served[0])) onOne++;
    for (const w of served) perWorker[workers.indexOf(w)]!++;
  }
  return {
    steps,
    generations: byKey.size,
    steps_on_first_worker: steps ? round(onFirst / steps, 4) : 0,
    generations_on_one_worker: byKey.size ? round(onOne / byKey.size, 4) : 0,
    steps_per_worker: perWorker,
  };
}

async function startWorkers(count: number, vocabSize: number, maxContext: number, serviceMs: number): Promise<{ children: IpcChild[]; addresses: string[] }> {
  const options: SglangFakeOptions = { vocabSize, maxContext, serviceMs, prefillMsPerToken: PREFILL_MS_PER_TOKEN, cacheTokens: CACHE_TOKENS };
  const script = new URL('./sglang-service-fake.ts', import.meta.url).pathname;
  const started = await Promise.allSettled(Array.from({ length: count }, () => startIpcChild<SglangFakeReply>({ script, options, name: 'an SGLang fake' })));
  const children = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value.child] : []));
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    await Promise.all(children.map((child) => stopIpcChild(child)));
    throw (failed as PromiseRejectedResult).reason;
  }
  const addresses = started.map((s) => new URL((s as PromiseFulfilledResult<{ ready: { type: 'ready'; url: string } }>).value.ready.url).host);
  return { children, addresses };
}

/** One arm: fresh workers, nginx in front of them, a shim on nginx, the edges for `durationS`. */
async function runArm(o: AffinityOptions, corpus: Corpus, arm: AffinityArm): Promise<AffinityRow> {
  const pack = loadModelPack(DEMO.cloudPack);
  const { children, addresses } = await startWorkers(o.workers, pack.vocabSize, pack.maxPositions, o.serviceMs);
  let nginx: NginxProcess | undefined;
  let shim: ShimChild | undefined;
  const clients: GrpcCloudClient[] = [];
  try {
    nginx = await NginxProcess.start(SGLANG_AFFINITY_CONFIG, addresses, arm === 'key' ? {} : { edit: withoutKeyHash });
    const started = await ShimChild.start({ backend: 'sglang', backendUrl: `http://${nginx.address}`, maxSessions: 2 * o.edges + 8 });
    shim = started.shim;
    for (let i = 0; i < o.edges; i++) clients.push(new GrpcCloudClient({ address: started.address, ownConnection: true }));
    const tally = new FleetTally();
    const now = performance.now();
    const run = { pace: o.pace, seed: o.seed, measureFrom: now, deadline: now + o.durationS * 1000 };
    await Promise.all(clients.map((client, i) => fleetEdge(client, corpus, i, run, tally)));
    const accessLog = await readFile(join(nginx.dir, 'access.log'), 'utf8');
    const row: AffinityRow = {
      arm,
      workers: o.workers,
      edges: o.edges,
      ...affinityOf(stepsByKey(accessLog), addresses),
      cached_share: tally.contextTokens ? round(tally.cachedTokens / tally.contextTokens, 4) : 0,
      follow_up_cached_share: tally.followUpContextTokens ? round(tally.followUpCachedTokens / tally.followUpContextTokens, 4) : 0,
      prefilled_tokens_per_step: tally.steps ? round((tally.contextTokens - tally.cachedTokens) / tally.steps, 1) : 0,
      p50_round_trip_ms: round(percentile(tally.roundTripMs, 50)),
      p99_round_trip_ms: round(percentile(tally.roundTripMs, 99)),
      errors: tally.errors,
      ...(tally.messages.size ? { error_messages: [...tally.messages] } : {}),
    };
    o.log(`${arm}: ${row.steps} steps of ${row.generations} generations, ${(row.steps_on_first_worker * 100).toFixed(1)}% on their first worker`);
    return row;
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
    await shim?.stop();
    await nginx?.stop();
    await Promise.all(children.map((child) => stopIpcChild(child)));
  }
}

export async function runAffinityBench(o: AffinityOptions): Promise<AffinityRow[]> {
  const corpus = await loadCorpus(DEMO.cloudPack);
  const rows: AffinityRow[] = [];
  for (const arm of ['key', 'no key'] as const) rows.push(await runArm(o, corpus, arm));
  return rows;
}

export function formatAffinity(rows: AffinityRow[], o: Omit<AffinityOptions, 'log'>): string {
  const percent = (x: number) => `${(x * 100).toFixed(1)}%`;
  const lines = [
    `affinity benchmark: one shim → nginx (deploy/nginx-sglang-affinity.conf) → ${o.workers} SGLang fakes; ${o.edges} edges for ${o.durationS} s`,
    `  edges: ${o.pace.share} of tokens routed, ${o.pace.span} per step, ${o.pace.genTokens} per generation, ${o.pace.tokenMs} ms per edge token; one routing key per generation`,
    '',
    '| arm | steps | generations | steps on first worker | generations on one worker | steps per worker | cached (all / after first step) | prefilled tokens per step | round trip p50 / p99 ms | errors |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.arm} | ${r.steps} | ${r.generations} | ${percent(r.steps_on_first_worker)} | ${percent(r.generations_on_one_worker)} | ${r.steps_per_worker.join(' / ')} | ${percent(r.cached_share)} / ${percent(r.follow_up_cached_share)} | ${r.prefilled_tokens_per_step} | ${r.p50_round_trip_ms.toFixed(2)} / ${r.p99_round_trip_ms.toFixed(2)} | ${r.errors} |`,
    ),
  ];
  for (const r of rows) for (const message of r.error_messages ?? []) lines.push(`  error (${r.arm}): ${message}`);
  return lines.join('\n');
}

export function parseAffinityFlags(args: string[]): { options: Omit<AffinityOptions, 'log'>; json: boolean } {
  const { values, positionals } = parseFlags(args, {
    workers: { type: 'string' },
    edges: { type: 'string' },
    duration: { type: 'string' },
    'token-ms': { type: 'string' },
    share: { type: 'string' },
    'gen-tokens': { type: 'string' },
    'service-ms': { type: 'string' },
    seed: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const options = {
    workers: integerFlag(values, 'workers', 2, [2, 16])!,
    edges: integerFlag(values, 'edges', 32, [1, 256])!,
    durationS: integerFlag(values, 'duration', 10, [1, 300])!,
    pace: {
      tokenMs: numberFlag(values, 'token-ms', 25, [0, 10_000])!,
      share: numberFlag(values, 'share', 0.1, [0.001, 1])!,
      span: 1,
      genTokens: integerFlag(values, 'gen-tokens', 128, [1, 256])!,
    },
    serviceMs: numberFlag(values, 'service-ms', 2, [0, 10_000])!,
    seed: integerFlag(values, 'seed', 1, [0, 2 ** 31 - 1])!,
  };
  return { options, json: values.json === true };
}

export async function main(args: string[]): Promise<void> {
  const { options, json } = parseAffinityFlags(args);
  await buildDemoPacks();
  const rows = await runAffinityBench({ ...options, log: (line) => console.error(line) });
  console.log(formatAffinity(rows, options));
  if (json) console.log(JSON.stringify({ rows, settings: options }));
}
