/**
 * `bench latency`'s options and their flags: which pair and router, how many prompts and tokens, the
 * injected round trip, the routing settings, and how to reach a cloud shim that runs elsewhere.
 *
 * @example
 * const { options, json } = parseLatencyFlags(['--rtt-ms', '0', '--prompts', '2']);
 */
import { join } from 'node:path';
import { DEFAULT_LIMITS, ROUTE_BUDGET_BOUNDS } from '../../edge/request/generation-request.ts';
import type { ClientTlsFiles } from '../../shared/grpc/tls.ts';
import { ASSETS_DIR, DEMO } from '../../shared/paths.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { CLOUD_FLAGS, cloudSourceFlags } from '../cloud-flags.ts';
import { shimTlsFiles } from '../lab/cloud-scorer.ts';
import { parseThresholds } from '../eval/eval-options.ts';
import { isCpuList } from './cpu-pinning.ts';
import type { CloudPrefillMode } from '../../edge/loop/edge-engine.ts';
import { MODEL_THREADS, type ModelThread } from '../../shared/model/model-session.ts';

const isModelThread = (text: string): text is ModelThread => (MODEL_THREADS as readonly string[]).includes(text);

export const DEFAULT_DATASET = join(ASSETS_DIR, 'datasets', 'commonsenseqa', 'commonsenseqa_200_samples.jsonl');
/**
 * Around the demo router's default τ (0.8): from a few of the generated tokens routed to most of them on
 * the default prompts (docs/results.md, "Latency over a 170 ms round trip", has the shares).
 */
export const DEFAULT_BENCH_THRESHOLDS: readonly number[] = [0.6, 0.7, 0.8, 0.9];

/** `--router` value for UniformShareRouter. */
export const UNIFORM_ROUTER = 'uniform';

export interface LatencyBenchOptions {
  dataset: string;
  prompts: number;
  maxNewTokens: number;
  rttMs: number;
  thresholds: readonly number[];
  /** Wait budgets (route_wait_ms): each τ's joint rows again under each, beside fixed τ; empty = none. */
  routeWaitMs?: readonly number[];
  /** Tokens a routed step asks the cloud for (route_span); 1 when omitted. */
  routeSpan?: number;
  /** Joint rows for each value, in this order: without and/or with speculative continuation. */
  speculate: readonly boolean[];
  /** Joint rows for each value, in this order: the conversation opened at the first routed token (lazy) and/or with the request (eager). */
  prefill?: readonly CloudPrefillMode[];
  /** Speculating rows send a routed speculative position's step at once (EdgeEngine.speculation.conditionalSteps); default on. */
  conditionalSteps?: boolean;
  edgeModel: string;
  /** A router pack folder, `uniform` (UniformShareRouter), or undefined for the built-in top-1 scorer. */
  router: string | undefined;
  /** The embedded backend's pack, for the shim started in process. */
  cloudModel: string;
  /** `host:port` of a running shim; when set, no shim is started here. */
  cloud?: string;
  /** How to reach `cloud`, as the tools' cloud flags say (cloud-flags.ts). */
  cloudToken?: string;
  cloudTls?: ClientTlsFiles;
  threads?: number;
  /** Where the edge's and the shim's forward passes run (--model-thread, as the edge and the shim take it); worker by default. */
  modelThread?: ModelThread;
  /** CPUs (taskset list) for this process, the edge; set together with `shimCpus`. */
  edgeCpus?: string;
  /** CPUs for the shim, then started as a separate process rather than in this one. */
  shimCpus?: string;
  log: (line: string) => void;
}

/** Splits `host:port` (the last colon separates the port). */
export function parseAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  const port = Number(address.slice(i + 1));
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  if (i <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--cloud must be HOST:PORT, got ${JSON.stringify(address)}`);
  return { host, port };
}

/** Comma-separated wait budgets in ms (route_wait_ms), each once, ascending. */
export function parseWaitBudgets(raw: string): number[] {
  const numbers = raw.split(',').map((p) => Number(p.trim()));
  const max = ROUTE_BUDGET_BOUNDS.maxWaitMs;
  if (raw.trim() === '' || numbers.some((n) => !Number.isInteger(n) || n < 1 || n > max)) {
    throw new UsageError(`--route-wait-ms must be comma-separated integers in [1, ${max}], got ${JSON.stringify(raw)}`);
  }
  return [...new Set(numbers)].sort((a, b) => a - b);
}

/** `off`, `on` or both (comma-separated, each once), in the order given. */
export function parseSpeculate(raw: string): boolean[] {
  const parts = raw.split(',').map((p) => p.trim());
  if (!parts.every((p) => p === 'on' || p === 'off') || new Set(parts).size !== parts.length) {
    throw new UsageError(`--speculate must be off, on or off,on, got ${JSON.stringify(raw)}`);
  }
  return parts.map((p) => p === 'on');
}

/** `lazy`, `eager` or both (comma-separated, each once), in the order given. */
export function parsePrefill(raw: string): CloudPrefillMode[] {
  const parts = raw.split(',').map((p) => p.trim());
  if (!parts.every((p) => p === 'lazy' || p === 'eager') || new Set(parts).size !== parts.length) {
    throw new UsageError(`--cloud-prefill must be lazy, eager or lazy,eager, got ${JSON.stringify(raw)}`);
  }
  return parts as CloudPrefillMode[];
}

/**
 * The flags of `bench latency` as options (all but `log`); `usesDemo` when a demo pack fills a default. Its
 * cloud comes from the tools' cloud flags (cloud-flags.ts): `--cloud-model` is the pack of the shim started
 * here, `--cloud` a running shim's address.
 */
export function parseLatencyFlags(
  args: string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
): { options: Omit<LatencyBenchOptions, 'log'>; json: boolean; usesDemo: boolean } {
  const { values, positionals } = parseFlags(args, {
    prompts: { type: 'string' },
    'max-new-tokens': { type: 'string' },
    'rtt-ms': { type: 'string' },
    thresholds: { type: 'string' },
    'route-wait-ms': { type: 'string' },
    'route-span': { type: 'string' },
    speculate: { type: 'string' },
    'cloud-prefill': { type: 'string' },
    'conditional-steps': { type: 'string' },
    dataset: { type: 'string' },
    'edge-model': { type: 'string' },
    router: { type: 'string' },
    ...CLOUD_FLAGS,
    threads: { type: 'string' },
    'model-thread': { type: 'string' },
    'edge-cpus': { type: 'string' },
    'shim-cpus': { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const prompts = integerFlag(values, 'prompts', 5, [1, 1000])!;
  const maxNewTokens = integerFlag(values, 'max-new-tokens', 100, [1, 1024])!;
  const rttMs = integerFlag(values, 'rtt-ms', 170, [0, 5000])!;
  const threads = integerFlag(values, 'threads', undefined, [1, 256]);
  const routeSpan = integerFlag(values, 'route-span', 1, [1, DEFAULT_LIMITS.maxRouteSpan])!;
  const routeWaitMs = values['route-wait-ms'] === undefined ? [] : parseWaitBudgets(values['route-wait-ms']);
  const source = cloudSourceFlags(values, env, DEMO.cloudPack);
  if ('pack' in source && source.file !== undefined) throw new UsageError("--cloud-model-file: bench latency's shim runs its pack's model.onnx");
  const shim = 'shim' in source ? source.shim : undefined;
  if (shim) parseAddress(shim.address);
  if ((values['edge-cpus'] === undefined) !== (values['shim-cpus'] === undefined)) throw new UsageError('--edge-cpus and --shim-cpus go together');
  if (values['shim-cpus'] !== undefined && values.cloud !== undefined) throw new UsageError('--shim-cpus starts a shim here: it excludes --cloud');
  const edgeCpus = values['edge-cpus'];
  const shimCpus = values['shim-cpus'];
  for (const [flag, cpus] of [
    ['--edge-cpus', edgeCpus],
    ['--shim-cpus', shimCpus],
  ] as const) {
    if (cpus !== undefined && !isCpuList(cpus)) throw new UsageError(`${flag} must be a CPU list such as 1, 0,2 or 2-3, got ${JSON.stringify(cpus)}`);
  }
  const thresholds = values.thresholds === undefined ? DEFAULT_BENCH_THRESHOLDS : parseThresholds(values.thresholds);
  const speculate = parseSpeculate(values.speculate ?? 'off');
  const conditional = values['conditional-steps'] ?? 'on';
  if (conditional !== 'on' && conditional !== 'off') throw new UsageError(`--conditional-steps must be on or off, got ${JSON.stringify(conditional)}`);
  const modelThread = values['model-thread'] ?? 'worker';
  if (!isModelThread(modelThread)) throw new UsageError(`--model-thread must be one of ${MODEL_THREADS.join(', ')}, got ${JSON.stringify(modelThread)}`);
  const router = values.router ?? DEMO.routerPack;
  const usesDemo = values['edge-model'] === undefined || (values['cloud-model'] === undefined && values.cloud === undefined) || values.router === undefined;
  return {
    options: {
      dataset: values.dataset ?? DEFAULT_DATASET,
      prompts,
      maxNewTokens,
      rttMs,
      thresholds,
      routeWaitMs,
      routeSpan,
      speculate,
      prefill: parsePrefill(values['cloud-prefill'] ?? 'lazy'),
      conditionalSteps: conditional === 'on',
      edgeModel: values['edge-model'] ?? DEMO.edgePack,
      router: router === 'builtin' ? undefined : router,
      cloudModel: 'shim' in source ? DEMO.cloudPack : typeof source.pack === 'string' ? source.pack : source.pack.dir,
      cloud: shim?.address,
      cloudToken: shim?.authToken,
      cloudTls: shim ? shimTlsFiles(shim) : undefined,
      threads,
      modelThread,
      edgeCpus,
      shimCpus,
    },
    json: values.json === true,
    usesDemo,
  };
}
