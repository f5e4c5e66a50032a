/**
 * `bench latency`: the reference design's latency table (Table 1 of She et al., ACL 2025 demo) on this system. One row per
 * routing setting (`small_only`, `joint` at each τ, `llm_only`), each the mean over the same CommonsenseQA
 * prompts of the decoding loop's own final metrics: routed tokens, edge model time, TTFT, time between
 * tokens on the edge, communication + cloud model time, and the whole request.
 *
 * Everything is real except the distance: the edge model, the trained router and the real decoding loop
 * run here; routed tokens go through the production gRPC client to a cloud shim started in process (the
 * embedded backend with the demo cloud pack, or `--cloud` for a shim elsewhere), over a loopback TCP
 * proxy that delays every chunk by RTT/2 in each direction. Each routed step therefore costs at least one
 * injected round trip, and the "predicted" column (cloud calls × RTT + the backend compute the shim
 * reports) shows how much of the measured comm + cloud model time that accounts for; the residual per call is
 * the rest (gRPC framing, the shim, the proxy's timer granularity).
 */
import { shimConfig } from '../../cloud/config.ts';
import { startShim, type ShimServer } from '../../cloud/shim-server.ts';
import { BoxRouting } from '../../edge/routing/box-routing.ts';
import { interceptSteps, type CloudClient } from '../../edge/cloud/cloud-client.ts';
import { generate, type DoneEvent, type EdgeEngine } from '../../edge/loop/decoder-loop.ts';
import { parseGenerationRequest } from '../../edge/request/generation-request.ts';
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { loadEdgeEngine } from '../../edge/server/load-edge-engine.ts';
import { AppError } from '../../shared/errors.ts';
import { silentLogger } from '../../shared/process/logger.ts';
import { DEMO } from '../../shared/paths.ts';
import { startDelayProxyThread, type DelayProxyThread } from '../delay-proxy/delay-proxy-thread.ts';
import { readEvalDataset } from '../eval/eval-dataset.ts';
import { buildChoicePrompt } from '../eval/multiple-choice.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { pinThisProcess, startPinnedShim, type PinnedShim } from './cpu-pinning.ts';
import { parseAddress, parseLatencyFlags, UNIFORM_ROUTER, type LatencyBenchOptions } from './latency-options.ts';
import {
  formatLatencyTable,
  identicalOutputs,
  label,
  summarize,
  type CloudTally,
  type LatencyBenchResult,
  type PromptRun,
  type Setting,
} from './latency-report.ts';
import { UniformShareRouter } from './uniform-share-router.ts';
import { splitExtra } from './latency-floor.ts';

export const USAGE = `bench latency [--prompts N] [--max-new-tokens N] [--rtt-ms MS] [--thresholds LIST] [--route-wait-ms LIST] [--route-span N]
                [--speculate off,on] [--cloud-prefill lazy,eager] [--conditional-steps on|off] [--dataset FILE]
                [--edge-model PACK] [--router DIR|builtin|uniform] [--cloud-model PACK | --cloud HOST:PORT] [--threads T]
                [--model-thread worker|main] [--json]
                [--edge-cpus LIST --shim-cpus LIST]
                [--cloud-token T] [--cloud-tls-ca PEM] [--cloud-tls-cert PEM --cloud-tls-key PEM]
      the reference paper's Table 1: small_only, joint at each τ (default 0.6,0.7,0.8,0.9) and llm_only
      over real gRPC to a cloud shim through a loopback proxy adding --rtt-ms (default 170; 0 = direct); the
      shim it starts keeps no prefix cache, since every row generates from the same prompts;
      default: 5 CommonsenseQA prompts, up to 100 greedy tokens, the demo pair (about 4 minutes);
      --router uniform: route a share τ of positions spread at random (uniform-share-router.ts), for packs
      whose router routes whole prompts alike (random weights);
      --route-wait-ms: each joint row again under each wait budget (route_wait_ms; e.g. 300), beside fixed τ;
      every row reports the per-token cloud wait (p50, p99, max; a token that did not route waits 0);
      --route-span: tokens a routed step asks the cloud for (default 1);
      --speculate: joint rows without and/or with speculative continuation (default off), on the same prompts;
      --cloud-prefill: joint rows with the conversation opened at the first routed token (lazy, the default)
      and/or with the request, the prompt sent ahead for the cloud to prefill (eager); every row splits its
      extra time over small_only into cloud prefill on the critical path, the tail and re-decode;
      --conditional-steps off: a speculative position that routes waits for the first reply instead of being
      sent at once as a conditional step (default on);
      a --cloud shim is dialed as the edge would (bearer token, TLS or mutual TLS with the --cloud-* flags);
      --model-thread: where the edge's and the shim's forward passes run, as the edge and the shim take it
      (default worker);
      --edge-cpus/--shim-cpus: the edge on these CPUs and the shim as a separate process on those (taskset
      lists, e.g. 0 and 1), so that the cloud model does not compute on the edge's cores;
      --edge-model and --cloud-model were --slm and --llm (old names, still accepted)`;

/**
 * The shim this bench starts keeps no prefix cache. Every row generates from the same prompts: with one, a row's
 * first step would find the prompt an earlier row's session computed, and a lazy open would look as cheap as one
 * sent ahead.
 */
const SHIM_PREFIX_CACHE_MB = 0;

/** Counts the steps of the current generation and their backend time on their way through `client`. */
class CloudMeter {
  readonly client: CloudClient;
  private tally: CloudTally = { calls: 0, backendMs: 0, stepBackendMs: [], stepCloudMs: [] };

  constructor(inner: CloudClient) {
    this.client = interceptSteps(inner, async (request, next) => {
      const reply = await next(request);
      // A skipped conditional step asked the cloud for nothing: it is no call (conditional_steps counts it).
      if (reply.skipped) return reply;
      this.tally.calls++;
      this.tally.backendMs += reply.backendMs;
      this.tally.stepBackendMs.push(reply.backendMs);
      this.tally.stepCloudMs.push(reply.backendMs + reply.shimMs);
      return reply;
    });
  }

  /** The counts since the last call, and a fresh start. */
  take(): CloudTally {
    const t = this.tally;
    this.tally = { calls: 0, backendMs: 0, stepBackendMs: [], stepCloudMs: [] };
    return t;
  }
}

async function runOnce(engine: EdgeEngine, meter: CloudMeter, prompt: string, setting: Setting, maxNewTokens: number, routeSpan = 1): Promise<PromptRun> {
  // Thresholds outside joint mode are ignored by the loop; 0 / 1 say what the mode means.
  const threshold = setting.threshold ?? (setting.mode === 'llm_only' ? 1 : 0);
  const budget = setting.routeWaitMs === null ? {} : { routeWaitMs: setting.routeWaitMs };
  const request = parseGenerationRequest({
    prompt,
    mode: setting.mode,
    threshold,
    maxNewTokens,
    temperature: 0,
    speculate: setting.speculate,
    routeSpan,
    ...budget,
  });
  meter.take();
  let done: DoneEvent | undefined;
  let cloudError: string | undefined;
  const ids: number[] = [];
  const waits: number[] = [];
  let firstRoutedWaitMs: number | null = null;
  for await (const event of generate(engine, request)) {
    if (event.type === 'done') done = event;
    else if (event.type === 'token') {
      ids.push(event.id);
      // The loop times the step on a span's first token; the rest arrived with it and waited nothing more.
      waits.push(event.timings.cloudMs);
      // A span's first token carries the step's wait; the rest of it, 0.
      if (event.source !== 'slm' && event.timings.cloudMs > 0) firstRoutedWaitMs ??= event.timings.cloudMs;
      cloudError ??= event.cloudError;
    }
  }
  if (!done) throw new AppError('INTERNAL', 'the decoding loop ended without a done event');
  return { ids, waits, metrics: done.metrics, cloud: meter.take(), cloudError, firstRoutedWaitMs };
}

export async function runLatencyBench(o: LatencyBenchOptions): Promise<LatencyBenchResult> {
  const dataset = readEvalDataset(o.dataset);
  if (dataset.kind !== 'multiple-choice') throw new AppError('INVALID_ARGUMENT', `${o.dataset}: not a CommonsenseQA JSONL file`);
  const prompts = dataset.questions.slice(0, o.prompts).map(buildChoicePrompt);
  const waits = [null, ...(o.routeWaitMs ?? [])];
  const settings: Setting[] = [
    { mode: 'small_only', threshold: null, speculate: false, routeWaitMs: null },
    ...o.thresholds.flatMap((threshold) =>
      o.speculate.flatMap((speculate) =>
        (o.prefill ?? ['lazy']).flatMap((prefill) =>
          waits.map((routeWaitMs) => ({ mode: 'joint' as const, threshold, speculate, routeWaitMs, prefillAhead: prefill === 'eager' })),
        ),
      ),
    ),
    { mode: 'llm_only', threshold: null, speculate: false, routeWaitMs: null },
  ];

  let shim: ShimServer | undefined;
  let pinnedShim: PinnedShim | undefined;
  let proxy: DelayProxyThread | undefined;
  let grpc: GrpcCloudClient | undefined;
  const modelThread = o.modelThread ?? 'worker';
  if (o.edgeCpus) pinThisProcess(o.edgeCpus);
  const parts = await loadEdgeEngine({
    edgeModel: o.edgeModel,
    threads: o.threads,
    thread: modelThread,
    router: o.router === UNIFORM_ROUTER ? new UniformShareRouter(1) : o.router,
  });
  try {
    let target: { host: string; port: number };
    if (o.cloud) target = parseAddress(o.cloud);
    else if (o.shimCpus) {
      pinnedShim = await startPinnedShim({
        cpus: o.shimCpus,
        modelPack: o.cloudModel,
        threads: o.threads,
        modelThread,
        prefixCacheMb: SHIM_PREFIX_CACHE_MB,
        log: o.log,
      });
      target = parseAddress(pinnedShim.address);
    } else {
      shim = await startShim(
        shimConfig({
          host: '127.0.0.1',
          port: 0,
          modelPack: o.cloudModel,
          threads: o.threads ?? 0,
          modelThread,
          prefixCacheMb: SHIM_PREFIX_CACHE_MB,
          logLevel: 'silent',
        }),
        {
          log: silentLogger,
        },
      );
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
    const engine: EdgeEngine = { ...parts, cloud: meter.client, speculation: { conditionalSteps: o.conditionalSteps ?? true } };

    // Warm-up, not measured: onnxruntime's first runs, and the gRPC connection through the proxy (its
    // TCP and HTTP/2 handshakes would otherwise land in the first routed prompt's TTFT).
    o.log('warm-up');
    await runOnce(engine, meter, prompts[0]!, { mode: 'small_only', threshold: null, speculate: false, routeWaitMs: null }, 8);
    const warm = await runOnce(engine, meter, prompts[0]!, { mode: 'llm_only', threshold: null, speculate: false, routeWaitMs: null }, 2);
    if (warm.metrics.fallback > 0) throw new AppError('UNAVAILABLE', `the cloud at ${o.cloud ?? shim!.address} did not answer: ${warm.cloudError}`);

    // Each setting is its own edge box: a wait budget learns the round trip from its own steps only, from
    // nothing at the first prompt (a fresh box routes until it has measured a wait), across the prompts after.
    const engines = settings.map(
      (setting): EdgeEngine => ({ ...engine, routing: new BoxRouting(), cloudPrefill: { mode: setting.prefillAhead ? 'eager' : 'lazy' } }),
    );
    // Prompt by prompt, every setting in turn, so that drifts in machine load touch all rows alike.
    const runs: PromptRun[][] = settings.map(() => []);
    for (const [p, prompt] of prompts.entries()) {
      for (const [s, setting] of settings.entries()) {
        const run = await runOnce(engines[s]!, meter, prompt, setting, o.maxNewTokens, o.routeSpan);
        runs[s]!.push(run);
        const { tokens, routed, totalMs } = run.metrics;
        o.log(`prompt ${p + 1}/${prompts.length} ${label(setting)}: ${tokens} tokens, ${routed} routed, ${(totalMs / 1000).toFixed(2)} s`);
      }
    }

    const rows = settings.map((setting, s) => summarize(setting, runs[s]!, o.rttMs));
    const base = rows[0]!.tbt_ms;
    for (const row of rows) row.tbt_ratio = row.mode === 'llm_only' || base === 0 ? null : row.tbt_ms / base;
    for (const row of rows) row.overall_ratio = row.overall_ms / rows[0]!.overall_ms;
    for (const row of rows) splitExtra(row, rows[0]!.overall_ms);
    return {
      rtt_ms: o.rttMs,
      prompts: prompts.length,
      max_new_tokens: o.maxNewTokens,
      dataset: o.dataset,
      slm: parts.edgeModel.pack.dir,
      router: parts.router.info.name,
      cloud:
        o.cloud ??
        (o.shimCpus ? `shim process on CPUs ${o.shimCpus} (edge on ${o.edgeCpus}), embedded ${o.cloudModel}` : `in-process shim, embedded ${o.cloudModel}`),
      route_span: o.routeSpan ?? 1,
      model_thread: modelThread,
      rows,
      identical_outputs: identicalOutputs(settings, runs),
    };
  } finally {
    await grpc?.close();
    await proxy?.close();
    await shim?.shutdown();
    await pinnedShim?.stop();
    await parts.release();
  }
}

export async function main(args: string[]): Promise<void> {
  const { options, json, usesDemo } = parseLatencyFlags(args);
  if (usesDemo) await buildDemoPacks(DEMO, (line) => console.error(line));
  const result = await runLatencyBench({ ...options, log: (line) => console.error(line) });
  console.log(formatLatencyTable(result));
  if (json) console.log(JSON.stringify(result));
}
