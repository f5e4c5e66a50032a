/**
 * `bench shim`: what the edge ↔ cloud hop costs. In one run, on loopback with the embedded backend and the
 * demo cloud pack (or `--pack`):
 * - the shim's overhead: round trip of a one-token routed step as the edge's gRPC client sees it, minus
 *   the backend's compute time reported by the shim;
 * - the bytes of one routed one-token step request as serialized (no hidden state);
 * - the embedded backend's time for one routed token at context 50 and 400 (a delta of the shim's last
 *   token plus one edge token, the rest served from the session's KV cache), their ratio, and for
 *   comparison the time to re-prefill the 400-token context.
 */
import { shimConfig } from '../../cloud/config.ts';
import { EmbeddedBackend } from '../../cloud/backends/embedded-backend.ts';
import { silentLogger } from '../../shared/process/logger.ts';
import { startShim } from '../../cloud/shim-server.ts';
import type { SamplingSettings } from '../../cloud/backends/backend.ts';
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import { percentile, round } from '../../shared/statistics.ts';
import { stepMessage } from '../../edge/cloud/context-delta.ts';
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { serializeRouteRequest } from '../../shared/grpc/proto.ts';
import { toWireSources } from '../../shared/grpc/wire.ts';
import { DEMO } from '../../shared/paths.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { integerFlag, parseFlags } from '../cli-support.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { CloudGate } from '../../edge/cloud/cloud-gate.ts';

export const USAGE = `bench shim [--pack DIR] [--steps N] [--reps R] [--threads T] [--json]
      gRPC round trip minus backend time (shim overhead), wire bytes of a routed step, embedded
      backend step time at context 50 and 400 (KV reuse); default pack: the demo cloud model`;

export interface ShimBenchResult {
  pack: string;
  steps: number;
  shim_overhead_ms_p50: number;
  shim_overhead_ms_p90: number;
  /** The shim's own time per step (server side, without the network). */
  shim_internal_ms_p50: number;
  round_trip_ms_p50: number;
  wire_bytes_per_step: number;
  wire_bytes_per_step_with_hidden: number;
  llm_step_ms_ctx50: number;
  llm_step_ms_ctx400: number;
  kv_reuse_ratio: number;
  reprefill_ms_ctx400: number;
  targets: { shim_overhead_ms_p50: boolean; wire_bytes_per_step: boolean; kv_reuse_ratio: boolean };
}

const GREEDY: SamplingSettings = Object.freeze({ temperature: 0, topP: 1, seed: undefined, stopTokenIds: [], topLogprobs: 0 });

/** Real text as token ids, long enough for the largest context measured. */
async function corpusIds(pack: string, count: number): Promise<number[]> {
  const tokenizer = await TextTokenizer.fromPack(pack);
  let text = '';
  try {
    text = await Bun.file(DEMO.tinyStories).text();
  } catch {
    text = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ';
  }
  const ids = [tokenizer.bosId ?? 1, ...tokenizer.encode(text.slice(0, count * 8), { addBos: false })];
  while (ids.length < count) ids.push(...ids.slice(1, count - ids.length + 1));
  return ids.slice(0, count);
}

/**
 * Median time of one routed token at context `length` in a running session: the session opens a few
 * steps earlier (a prefill, timed separately), takes WARM_STEPS routed steps, and the step that reaches
 * `length` is timed. Each step's delta is the shim's previous token plus one edge token.
 */
const WARM_STEPS = 4;

async function stepAtContext(backend: EmbeddedBackend, corpus: number[], length: number, reps: number): Promise<{ step: number; prefill: number }> {
  const steps: number[] = [];
  const prefills: number[] = [];
  const signal = new AbortController().signal;
  const step = (session: ReturnType<EmbeddedBackend['openSequence']>, context: number[]) =>
    session.step({ context, maxTokens: 1, sampling: GREEDY, requestId: 'bench', signal });
  for (let r = 0; r < reps; r++) {
    const start = r % 7;
    const next = (context: number[]) => corpus[start + context.length]!;
    const session = backend.openSequence();
    try {
      const context = corpus.slice(start, start + length - 2 * (WARM_STEPS + 1));
      const first = await step(session, context);
      context.push(first.ids[0]!, next(context));
      for (let i = 0; i < WARM_STEPS; i++) context.push((await step(session, context)).ids[0]!, next(context));
      steps.push((await step(session, context)).backendMs);
    } finally {
      session.dispose();
    }
    // The same context without a cache: what each step would cost if the session were re-prefilled.
    const fresh = backend.openSequence();
    try {
      prefills.push((await step(fresh, corpus.slice(start, start + length))).backendMs);
    } finally {
      fresh.dispose();
    }
  }
  return { step: percentile(steps, 50), prefill: percentile(prefills, 50) };
}

export async function runShimBench(options: { pack: string; steps: number; reps: number; threads: number }): Promise<ShimBenchResult> {
  const corpus = await corpusIds(options.pack, 480);

  // Backend compute at two context lengths: same model, same work per step, only the cache differs.
  const backend = await EmbeddedBackend.load({ modelPack: options.pack, threads: options.threads, maxLiveSequences: 8 });
  let ctx50: { step: number; prefill: number };
  let ctx400: { step: number; prefill: number };
  try {
    await stepAtContext(backend, corpus, 50, 3); // warm-up
    ctx50 = await stepAtContext(backend, corpus, 50, options.reps);
    ctx400 = await stepAtContext(backend, corpus, 400, options.reps);
  } finally {
    await backend.close();
  }

  // Round trips through the real gRPC stack on loopback.
  const shim = await startShim(shimConfig({ host: '127.0.0.1', port: 0, modelPack: options.pack, threads: options.threads, logLevel: 'silent' }), {
    log: silentLogger,
  });
  const client = new GrpcCloudClient({ address: shim.address });
  const overhead: number[] = [];
  const internal: number[] = [];
  const roundTrip: number[] = [];
  let wire = 0;
  let wireHidden = 0;
  try {
    const perConversation = 120;
    for (let done = 0, s = 0; done < options.steps + 20; s++) {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `bench-${s}` });
      const context = corpus.slice(0, 40);
      const sources: TokenSource[] = context.map(() => 'prompt');
      for (let i = 0; i < perConversation && done < options.steps + 20; i++, done++) {
        const request = {
          context,
          sources,
          tokenIndex: i,
          maxTokens: 1,
          temperature: 0,
          topP: 1,
          stopTokenIds: [],
          routerScore: 0.31,
          threshold: 0.5,
          topLogprobs: 0,
        };
        const started = performance.now();
        const reply = await conversation.next(request);
        const elapsed = performance.now() - started;
        if (done >= 20) {
          roundTrip.push(elapsed);
          overhead.push(elapsed - reply.backendMs);
          internal.push(reply.shimMs);
        }
        context.push(reply.tokens[0]!, corpus[context.length + 1]!);
        sources.push('llm', 'slm');
        if (i === 50) {
          // A routed one-token step exactly as the client frames it: one new edge token since the last call.
          const from = context.length - 1;
          const step = stepMessage(request, from, context.slice(from), toWireSources(sources.slice(from)));
          wire = serializeRouteRequest({ step }).length;
          wireHidden = serializeRouteRequest({ step: { ...step, slmHiddenState: Array.from(new Float32Array(896)) } }).length;
        }
      }
      await conversation.close();
    }
  } finally {
    await client.close();
    await shim.shutdown();
  }

  const shimOverhead = percentile(overhead, 50);
  const ratio = ctx400.step / ctx50.step;
  return {
    pack: options.pack,
    steps: overhead.length,
    shim_overhead_ms_p50: round(shimOverhead),
    shim_overhead_ms_p90: round(percentile(overhead, 90)),
    shim_internal_ms_p50: round(percentile(internal, 50)),
    round_trip_ms_p50: round(percentile(roundTrip, 50)),
    wire_bytes_per_step: wire,
    wire_bytes_per_step_with_hidden: wireHidden,
    llm_step_ms_ctx50: round(ctx50.step),
    llm_step_ms_ctx400: round(ctx400.step),
    kv_reuse_ratio: round(ratio),
    reprefill_ms_ctx400: round(ctx400.prefill),
    targets: { shim_overhead_ms_p50: shimOverhead <= 1, wire_bytes_per_step: wire <= 64, kv_reuse_ratio: ratio <= 1.5 },
  };
}

export function formatShimBench(r: ShimBenchResult): string {
  const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');
  const rows: [string, string, string][] = [
    ['shim overhead p50 (round trip − backend)', `${r.shim_overhead_ms_p50.toFixed(3)} ms`, `≤ 1 ms  ${mark(r.targets.shim_overhead_ms_p50)}`],
    ['shim overhead p90', `${r.shim_overhead_ms_p90.toFixed(3)} ms`, ''],
    ['  of which inside the shim (p50)', `${r.shim_internal_ms_p50.toFixed(3)} ms`, ''],
    ['round trip p50 (one-token step)', `${r.round_trip_ms_p50.toFixed(3)} ms`, ''],
    ['wire bytes per routed step', `${r.wire_bytes_per_step} B`, `≤ 64 B   ${mark(r.targets.wire_bytes_per_step)}`],
    ['  with an 896-float hidden state', `${r.wire_bytes_per_step_with_hidden} B`, ''],
    ['cloud model step, context 50 (embedded)', `${r.llm_step_ms_ctx50.toFixed(3)} ms`, ''],
    ['cloud model step, context 400 (embedded)', `${r.llm_step_ms_ctx400.toFixed(3)} ms`, ''],
    ['KV reuse ratio (ctx400 / ctx50)', r.kv_reuse_ratio.toFixed(3), `≤ 1.5    ${mark(r.targets.kv_reuse_ratio)}`],
    ['re-prefill of 400 tokens (no reuse)', `${r.reprefill_ms_ctx400.toFixed(3)} ms`, ''],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  return [
    `shim benchmark: ${r.pack}, ${r.steps} routed steps over loopback gRPC`,
    ...rows.map(([n, v, t]) => `  ${n.padEnd(width)}  ${v.padStart(10)}  ${t}`),
  ].join('\n');
}

export async function main(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    pack: { type: 'string' },
    steps: { type: 'string' },
    reps: { type: 'string' },
    threads: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (!values.pack) await buildDemoPacks();
  const result = await runShimBench({
    pack: (values.pack as string | undefined) ?? DEMO.cloudPack,
    steps: integerFlag(values, 'steps', 500)!,
    reps: integerFlag(values, 'reps', 30)!,
    threads: integerFlag(values, 'threads', 0)!,
  });
  console.log(formatShimBench(result));
  if (values.json) console.log(JSON.stringify(result));
}
