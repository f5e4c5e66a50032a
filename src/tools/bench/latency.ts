/**
 * `bench latency`: the reference paper's Table 1 (She et al., ACL 2025 demo) on this system. One row per
 * routing setting (`small_only`, `joint` at each τ, `llm_only`), each the mean over the same CommonsenseQA
 * prompts of the decoding loop's own final metrics: routed tokens, edge model time, TTFT, time between
 * tokens on the edge, communication + cloud model time, and the whole request.
 *
 * Everything is real except the distance: the edge model, the trained router and the real decoding loop
 * run here; routed tokens go through the production gRPC client to a cloud shim started in process (the
 * embedded backend with the demo cloud pack, or `--cloud` for a shim elsewhere), over a loopback TCP
 * proxy that delays every chunk by RTT/2 in each direction. Each routed step therefore costs at least one
 * injected round trip, and the "predicted" column (cloud calls × RTT + the backend compute the shim
 * reports) shows how much of the measured comm + LLM time that accounts for; the residual per call is
 * the rest (gRPC framing, the shim, the proxy's timer granularity).
 */
import { join } from 'node:path';
import { shimConfig } from '../../cloud/config.ts';
import { startShim, type ShimServer } from '../../cloud/shim-server.ts';
import { interceptSteps, type CloudClient } from '../../edge/cloud-client.ts';
import { generate, type DoneEvent, type EdgeEngine } from '../../edge/decoder-loop.ts';
import type { GenerationMetrics } from '../../edge/generation-metrics.ts';
import { mean } from '../../shared/statistics.ts';
import { parseGenerationRequest, type Mode } from '../../edge/generation-request.ts';
import { loadRouter, type Router } from '../../edge/router.ts';
import { UniformShareRouter } from './uniform-share-router.ts';
import { GrpcCloudClient } from '../../edge/grpc-cloud-client.ts';
import { DecoderModel } from '../../shared/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import type { ClientTlsFiles } from '../../shared/grpc/tls.ts';
import { silentLogger } from '../../shared/logger.ts';
import { loadModelPack } from '../../shared/model-pack.ts';
import { ASSETS_DIR, DEMO } from '../../shared/paths.ts';
import { TextTokenizer } from '../../shared/tokenizer.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { startDelayProxyThread, type DelayProxyThread } from './delay-proxy-thread.ts';
import { isCpuList, pinThisProcess, startPinnedShim, type PinnedShim } from './cpu-pinning.ts';
import { readEvalDataset } from '../eval/eval-dataset.ts';
import { parseThresholds } from '../eval/eval-options.ts';
import { buildChoicePrompt } from '../eval/multiple-choice.ts';
import { buildDemoPacks } from '../models/demo.ts';

export const USAGE = `bench latency [--prompts N] [--max-new-tokens N] [--rtt-ms MS] [--thresholds LIST] [--speculate off,on] [--conditional-steps on|off] [--dataset FILE]
                [--slm PACK] [--router DIR|builtin|uniform] [--llm PACK | --cloud HOST:PORT] [--threads T] [--json]
                [--edge-cpus LIST --shim-cpus LIST]
                [--cloud-token T] [--cloud-tls-ca PEM] [--cloud-tls-cert PEM --cloud-tls-key PEM]
      the reference paper's Table 1: small_only, joint at each τ (default 0.6,0.7,0.8,0.9) and llm_only
      over real gRPC to a cloud shim through a loopback proxy adding --rtt-ms (default 170; 0 = direct);
      default: 5 CommonsenseQA prompts, up to 100 greedy tokens, the demo pair (about 4 minutes);
      --router uniform: route a share τ of positions spread at random (uniform-share-router.ts), for packs
      whose router routes whole prompts alike (random weights);
      --speculate: joint rows without and/or with speculative continuation (default off), on the same prompts;
      --conditional-steps off: a speculative position that routes waits for the first reply instead of being
      sent at once as a conditional step (default on);
      a --cloud shim is dialed as the edge would (bearer token, TLS or mutual TLS with the --cloud-* flags);
      --edge-cpus/--shim-cpus: the edge on these CPUs and the shim as a separate process on those (taskset
      lists, e.g. 0 and 1), so that the cloud model does not compute on the edge's cores`;

export const DEFAULT_DATASET = join(ASSETS_DIR, 'datasets', 'commonsenseqa', 'commonsenseqa_200_samples.jsonl');
/**
 * Around the demo router's default τ (0.7): on the default prompts 2.5%, 13%, 31% and 61% of the generated
 * tokens routed (measured with --rtt-ms 0, 5 prompts × 64 tokens).
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
  /** Joint rows for each value, in this order: without and/or with speculative continuation. */
  speculate: readonly boolean[];
  /** Speculating rows send a routed speculative position's step at once (EdgeEngine.speculation.conditionalSteps); default on. */
  conditionalSteps?: boolean;
  slm: string;
  /** A router pack folder, `uniform` (UniformShareRouter), or undefined for the built-in top-1 scorer. */
  router: string | undefined;
  /** The embedded backend's pack, for the shim started in process. */
  llm: string;
  /** `host:port` of a running shim; when set, no shim is started here. */
  cloud?: string;
  /** How to reach `cloud`, as the edge's --cloud-token and --cloud-tls-* flags say. */
  cloudToken?: string;
  cloudTls?: ClientTlsFiles;
  threads?: number;
  /** CPUs (taskset list) for this process, the edge; set together with `shimCpus`. */
  edgeCpus?: string;
  /** CPUs for the shim, then started as a separate process rather than in this one. */
  shimCpus?: string;
  log: (line: string) => void;
}

/** One routing setting: means per prompt unless the name says otherwise. */
export interface LatencyRow {
  mode: Mode;
  /** τ of a joint row; null for small_only and llm_only. */
  threshold: number | null;
  /** Speculative continuation on (joint rows only: the other modes never speculate). */
  speculate: boolean;
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
  dataset: string;
  slm: string;
  router: string;
  cloud: string;
  rows: LatencyRow[];
  /** True when, for every prompt and τ, the joint tokens with and without speculation are the same; null unless both ran. */
  identical_outputs: boolean | null;
}

/** What the cloud did for one generation, as the replies report it. */
interface CloudTally {
  calls: number;
  backendMs: number;
}

/** Counts the steps of the current generation and their backend time on their way through `client`. */
class CloudMeter {
  readonly client: CloudClient;
  private tally: CloudTally = { calls: 0, backendMs: 0 };

  constructor(inner: CloudClient) {
    this.client = interceptSteps(inner, async (request, next) => {
      const reply = await next(request);
      // A skipped conditional step asked the cloud for nothing: it is no call (conditional_steps counts it).
      if (reply.skipped) return reply;
      this.tally.calls++;
      this.tally.backendMs += reply.backendMs;
      return reply;
    });
  }

  /** The counts since the last call, and a fresh start. */
  take(): CloudTally {
    const t = this.tally;
    this.tally = { calls: 0, backendMs: 0 };
    return t;
  }
}

interface Setting {
  mode: Mode;
  threshold: number | null;
  speculate: boolean;
}

interface PromptRun {
  /** The generated token ids, to compare settings that must agree. */
  ids: number[];
  metrics: GenerationMetrics;
  cloud: CloudTally;
  /** Why the cloud failed a routed token, the first time it did. */
  cloudError: string | undefined;
}

async function runOnce(engine: EdgeEngine, meter: CloudMeter, prompt: string, setting: Setting, maxNewTokens: number): Promise<PromptRun> {
  // Thresholds outside joint mode are ignored by the loop; 0 / 1 say what the mode means.
  const threshold = setting.threshold ?? (setting.mode === 'llm_only' ? 1 : 0);
  const request = parseGenerationRequest({ prompt, mode: setting.mode, threshold, maxNewTokens, temperature: 0, speculate: setting.speculate });
  meter.take();
  let done: DoneEvent | undefined;
  let cloudError: string | undefined;
  const ids: number[] = [];
  for await (const event of generate(engine, request)) {
    if (event.type === 'done') done = event;
    else if (event.type === 'token') {
      ids.push(event.id);
      cloudError ??= event.cloudError;
    }
  }
  if (!done) throw new AppError('INTERNAL', 'the decoding loop ended without a done event');
  return { ids, metrics: done.metrics, cloud: meter.take(), cloudError };
}

function summarize(setting: Setting, runs: PromptRun[], rttMs: number): LatencyRow {
  const m = (f: (r: PromptRun) => number) => mean(runs.map(f));
  const tokens = runs.reduce((s, r) => s + r.metrics.tokens, 0);
  const routed = runs.reduce((s, r) => s + r.metrics.routed, 0);
  const calls = runs.reduce((s, r) => s + r.cloud.calls, 0);
  const comm = m((r) => r.metrics.cloudMs);
  const predicted = m((r) => r.cloud.calls * rttMs + r.cloud.backendMs);
  const speculated = runs.reduce((s, r) => s + r.metrics.speculated, 0);
  const hits = runs.reduce((s, r) => s + r.metrics.speculationHits, 0);
  return {
    mode: setting.mode,
    threshold: setting.threshold,
    speculate: setting.speculate,
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

/** Splits `host:port` (the last colon separates the port). */
function parseAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  const port = Number(address.slice(i + 1));
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  if (i <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--cloud must be HOST:PORT, got ${JSON.stringify(address)}`);
  return { host, port };
}

export async function runLatencyBench(o: LatencyBenchOptions): Promise<LatencyBenchResult> {
  const dataset = readEvalDataset(o.dataset);
  if (dataset.kind !== 'multiple-choice') throw new AppError('INVALID_ARGUMENT', `${o.dataset}: not a CommonsenseQA JSONL file`);
  const prompts = dataset.questions.slice(0, o.prompts).map(buildChoicePrompt);
  const settings: Setting[] = [
    { mode: 'small_only', threshold: null, speculate: false },
    ...o.thresholds.flatMap((threshold) => o.speculate.map((speculate) => ({ mode: 'joint' as const, threshold, speculate }))),
    { mode: 'llm_only', threshold: null, speculate: false },
  ];

  const pack = loadModelPack(o.slm);
  let shim: ShimServer | undefined;
  let pinnedShim: PinnedShim | undefined;
  let proxy: DelayProxyThread | undefined;
  let grpc: GrpcCloudClient | undefined;
  if (o.edgeCpus) pinThisProcess(o.edgeCpus);
  const slm = await DecoderModel.load(pack, { threads: o.threads });
  const router: Router = o.router === UNIFORM_ROUTER ? new UniformShareRouter(1) : await loadRouter(o.router);
  try {
    const tokenizer = await TextTokenizer.fromPack(pack.dir);
    let target: { host: string; port: number };
    if (o.cloud) target = parseAddress(o.cloud);
    else if (o.shimCpus) {
      pinnedShim = await startPinnedShim({ cpus: o.shimCpus, modelPack: o.llm, threads: o.threads, log: o.log });
      target = parseAddress(pinnedShim.address);
    } else {
      shim = await startShim(shimConfig({ host: '127.0.0.1', port: 0, modelPack: o.llm, threads: o.threads ?? 0, logLevel: 'silent' }), { log: silentLogger });
      target = { host: '127.0.0.1', port: shim.port };
    }
    if (o.rttMs > 0) proxy = await startDelayProxyThread({ targetHost: target.host, targetPort: target.port, delayMs: o.rttMs / 2 });
    grpc = new GrpcCloudClient({
      address: proxy?.address ?? `${target.host}:${target.port}`,
      authToken: o.cloudToken,
      tls: o.cloudTls,
      // Through the proxy the certificate must still name the shim, not the proxy.
      tlsServerName: proxy ? target.host : undefined,
    });
    const meter = new CloudMeter(grpc);
    const engine: EdgeEngine = { slm, router, tokenizer, cloud: meter.client, speculation: { conditionalSteps: o.conditionalSteps ?? true } };

    // Warm-up, not measured: onnxruntime's first runs, and the gRPC connection through the proxy (its
    // TCP and HTTP/2 handshakes would otherwise land in the first routed prompt's TTFT).
    o.log('warm-up');
    await runOnce(engine, meter, prompts[0]!, { mode: 'small_only', threshold: null, speculate: false }, 8);
    const warm = await runOnce(engine, meter, prompts[0]!, { mode: 'llm_only', threshold: null, speculate: false }, 2);
    if (warm.metrics.fallback > 0) throw new AppError('UNAVAILABLE', `the cloud at ${o.cloud ?? shim!.address} did not answer: ${warm.cloudError}`);

    // Prompt by prompt, every setting in turn, so that drifts in machine load touch all rows alike.
    const runs: PromptRun[][] = settings.map(() => []);
    for (const [p, prompt] of prompts.entries()) {
      for (const [s, setting] of settings.entries()) {
        const run = await runOnce(engine, meter, prompt, setting, o.maxNewTokens);
        runs[s]!.push(run);
        const { tokens, routed, totalMs } = run.metrics;
        o.log(`prompt ${p + 1}/${prompts.length} ${label(setting)}: ${tokens} tokens, ${routed} routed, ${(totalMs / 1000).toFixed(2)} s`);
      }
    }

    const rows = settings.map((setting, s) => summarize(setting, runs[s]!, o.rttMs));
    const base = rows[0]!.tbt_ms;
    for (const row of rows) row.tbt_ratio = row.mode === 'llm_only' || base === 0 ? null : row.tbt_ms / base;
    for (const row of rows) row.overall_ratio = row.overall_ms / rows[0]!.overall_ms;
    return {
      rtt_ms: o.rttMs,
      prompts: prompts.length,
      max_new_tokens: o.maxNewTokens,
      dataset: o.dataset,
      slm: pack.dir,
      router: router.info.name,
      cloud: o.cloud ?? (o.shimCpus ? `shim process on CPUs ${o.shimCpus} (edge on ${o.edgeCpus}), embedded ${o.llm}` : `in-process shim, embedded ${o.llm}`),
      rows,
      identical_outputs: identicalOutputs(settings, runs),
    };
  } finally {
    await grpc?.close();
    await proxy?.close();
    await shim?.shutdown();
    await pinnedShim?.stop();
    await router.release();
    await slm.release();
  }
}

/** Whether every prompt's joint tokens match between the rows without and with speculation at each τ. */
function identicalOutputs(settings: Setting[], runs: PromptRun[][]): boolean | null {
  let compared = false;
  for (const [s, setting] of settings.entries()) {
    if (setting.mode !== 'joint' || !setting.speculate) continue;
    const t = settings.findIndex((x) => x.mode === 'joint' && x.threshold === setting.threshold && !x.speculate);
    if (t < 0) continue;
    compared = true;
    for (const [p, run] of runs[s]!.entries()) if (run.ids.join(',') !== runs[t]![p]!.ids.join(',')) return false;
  }
  return compared ? true : null;
}

function label(s: Pick<Setting, 'mode' | 'threshold' | 'speculate'>): string {
  return s.mode === 'joint' ? `joint τ=${s.threshold}${s.speculate ? ' spec' : ''}` : s.mode;
}

/** The result as a Markdown table with a line saying what was measured. */
export function formatLatencyTable(r: LatencyBenchResult): string {
  const ms = (x: number) => x.toFixed(1);
  const header = [
    'setting',
    'routed',
    'routed %',
    'tokens',
    'SLM (ms)',
    'TTFT (ms)',
    'TBT edge (ms)',
    'TBT / small_only',
    'comm + LLM (ms)',
    'predicted (ms)',
    'residual / call (ms)',
    'overall (ms)',
    'overall / small_only',
    'hit rate',
    'wasted steps',
    'conditional steps',
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
    ms(row.predicted_comm_llm_ms),
    row.residual_per_call_ms === null ? '–' : row.residual_per_call_ms.toFixed(2),
    ms(row.total_ms),
    row.overall_ratio.toFixed(2),
    row.hit_rate === null ? '–' : row.hit_rate.toFixed(2),
    row.wasted_steps.toFixed(1),
    row.conditional_steps.toFixed(1),
  ]);
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    `${r.prompts} prompts from ${r.dataset}, up to ${r.max_new_tokens} new tokens (greedy), RTT ${r.rtt_ms} ms injected; edge ${r.slm}, router ${r.router}, cloud: ${r.cloud}. Means per prompt; predicted = cloud calls × RTT + backend compute.`,
    '',
    line(header),
    line(header.map((_, i) => (i === 0 ? '---' : '---:'))),
    ...rows.map(line),
    ...(r.identical_outputs === null ? [] : ['', `identical outputs with and without speculation: ${r.identical_outputs}`]),
  ].join('\n');
}

/** `off`, `on` or both (comma-separated, each once), in the order given. */
export function parseSpeculate(raw: string): boolean[] {
  const parts = raw.split(',').map((p) => p.trim());
  if (!parts.every((p) => p === 'on' || p === 'off') || new Set(parts).size !== parts.length) {
    throw new UsageError(`--speculate must be off, on or off,on, got ${JSON.stringify(raw)}`);
  }
  return parts.map((p) => p === 'on');
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    prompts: { type: 'string' },
    'max-new-tokens': { type: 'string' },
    'rtt-ms': { type: 'string' },
    thresholds: { type: 'string' },
    speculate: { type: 'string' },
    'conditional-steps': { type: 'string' },
    dataset: { type: 'string' },
    slm: { type: 'string' },
    router: { type: 'string' },
    llm: { type: 'string' },
    cloud: { type: 'string' },
    'cloud-token': { type: 'string' },
    'cloud-tls-ca': { type: 'string' },
    'cloud-tls-cert': { type: 'string' },
    'cloud-tls-key': { type: 'string' },
    threads: { type: 'string' },
    'edge-cpus': { type: 'string' },
    'shim-cpus': { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const prompts = integerFlag(values, 'prompts', 5, [1, 1000])!;
  const maxNewTokens = integerFlag(values, 'max-new-tokens', 100, [1, 1024])!;
  const rttMs = integerFlag(values, 'rtt-ms', 170, [0, 5000])!;
  const threads = integerFlag(values, 'threads', undefined, [1, 256]);
  if (values.cloud !== undefined && values.llm !== undefined) throw new UsageError('--cloud (a running shim) and --llm (the in-process shim) exclude each other');
  if (values.cloud !== undefined) parseAddress(values.cloud);
  const cloudFlags = (['cloud-token', 'cloud-tls-ca', 'cloud-tls-cert', 'cloud-tls-key'] as const).filter((f) => values[f] !== undefined);
  if (cloudFlags.length && values.cloud === undefined) throw new UsageError(`--${cloudFlags[0]} is for a running shim: it needs --cloud HOST:PORT`);
  if ((values['cloud-tls-cert'] === undefined) !== (values['cloud-tls-key'] === undefined)) throw new UsageError('mutual TLS needs both --cloud-tls-cert and --cloud-tls-key');
  if ((values['edge-cpus'] === undefined) !== (values['shim-cpus'] === undefined)) throw new UsageError('--edge-cpus and --shim-cpus go together');
  if (values['shim-cpus'] !== undefined && values.cloud !== undefined) throw new UsageError('--shim-cpus starts a shim here: it excludes --cloud');
  const edgeCpus = values['edge-cpus'];
  const shimCpus = values['shim-cpus'];
  for (const [flag, cpus] of [['--edge-cpus', edgeCpus], ['--shim-cpus', shimCpus]] as const) {
    if (cpus !== undefined && !isCpuList(cpus)) throw new UsageError(`${flag} must be a CPU list such as 1, 0,2 or 2-3, got ${JSON.stringify(cpus)}`);
  }
  const tlsFiles = { caFile: values['cloud-tls-ca'], certFile: values['cloud-tls-cert'], keyFile: values['cloud-tls-key'] };
  const thresholds = values.thresholds === undefined ? DEFAULT_BENCH_THRESHOLDS : parseThresholds(values.thresholds);
  const speculate = parseSpeculate(values.speculate ?? 'off');
  const conditional = values['conditional-steps'] ?? 'on';
  if (conditional !== 'on' && conditional !== 'off') throw new UsageError(`--conditional-steps must be on or off, got ${JSON.stringify(conditional)}`);
  const router = values.router ?? DEMO.routerPack;
  const usesDemo = values.slm === undefined || (values.llm === undefined && values.cloud === undefined) || values.router === undefined;
  if (usesDemo) await buildDemoPacks(DEMO, (line) => console.error(line));
  const result = await runLatencyBench({
    dataset: values.dataset ?? DEFAULT_DATASET,
    prompts,
    maxNewTokens,
    rttMs,
    thresholds,
    speculate,
    conditionalSteps: conditional === 'on',
    slm: values.slm ?? DEMO.edgePack,
    router: router === 'builtin' ? undefined : router,
    llm: values.llm ?? DEMO.cloudPack,
    cloud: values.cloud,
    cloudToken: values['cloud-token'],
    cloudTls: tlsFiles.caFile || tlsFiles.certFile ? tlsFiles : undefined,
    threads,
    edgeCpus,
    shimCpus,
    log: (line) => console.error(line),
  });
  console.log(formatLatencyTable(result));
  if (values.json) console.log(JSON.stringify(result));
}
