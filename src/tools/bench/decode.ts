/**
 * `bench decode`: the edge model's decode speed next to what memory bandwidth allows. Decoding one
 * token reads every weight once (and the KV cache), so at batch 1 it is bound by memory bandwidth:
 * bound = bytes read per token / measured copy bandwidth. Measured in the same run: the prefill of a
 * `promptTokens`-token prompt (median of 3 after one untimed), then the median time of `steps` single
 * token decode steps after `warmup` untimed ones, each feeding the greedy token.
 *
 * Default target: a random-weight pack of the Qwen2.5-0.5B shape, built once under
 * models/bench/qwen2.5-0.5b (the same call `bench edge` uses, so either builds it for both).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { median, percentile } from '../../shared/statistics.ts';
import { DecoderModel, type DecoderSequence } from '../../shared/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { argmax } from '../../shared/logits.ts';
import { loadModelPack } from '../../shared/model-pack.ts';
import { copyBuffers, CopyTeam, singleThreadCopyBandwidth } from './decode-bandwidth.ts';
import { kvCacheBytes, weightTraffic } from './decode-weights.ts';
import { formatDtypeResults, runDtypes } from './decode-dtypes.ts';
import { type BenchDtype, parseDtypes } from './decode-packs.ts';
import type { DecoderLayout } from '../models/decoder-graph.ts';
import { formatPeerResults, PEER_TYPES, runLlamaCppPeer } from '../llama-cpp-peer/llama-cpp-peer.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { ensureBenchPack } from '../models/random-pack.ts';
import { parseLayout, profileCommand } from './decode-profile.ts';
import { decodeBreakdown, formatBreakdown } from './decode-breakdown.ts';
import { promptIds, resolvePack } from './decode-target.ts';

export { promptIds } from './decode-target.ts';
import { decodeBenchJson, formatDecodeBench, type DecodeBenchResult, type DecodeRound } from './decode-report.ts';

export const USAGE = `bench decode [--preset qwen2.5-0.5b | --pack DIR] [--layout plain|fused] [--dtype fp32,int8,q4] [--prompt-tokens 100] [--steps 32] [--warmup 4] [--rounds 4] [--threads N] [--copy-mib 1024] [--bandwidth-gb-s X] [--peer llama.cpp] [--profile] [--breakdown] [--json]
      edge decode ms/token and prefill time next to the memory-bandwidth bound (weights + KV cache
      read per token / measured copy bandwidth); a preset is built once under models/bench/; --dtype
      runs each weight type of the preset (quantized once with models quantize) in its own process and
      adds its peak RSS; --bandwidth-gb-s skips the copy measurement and uses the given figure;
      --peer llama.cpp (with --dtype) also times llama.cpp on the same weights as GGUF (F32, Q8_0, Q4_0)
      through node-llama-cpp under node, installed on first use into ~/.cache/edge-token-router;
      --profile runs --steps decode steps under onnxruntime's profiler instead and prints nodes per
      step, time per op type, the share outside the matrix products and the KV bytes copied per step
      (with --dtype: each type's pack in turn); --layout fused builds the preset in onnxruntime's fused
      layout (models/bench/<preset>-fused[-<dtype>]); --breakdown times, for 1 up to --threads intra-op
      threads, the step inside and outside onnxruntime's run, and the loop's per-token work after it
      (argmax over the logits, a sampled pick, a router call)`;

export interface DecodeBenchOptions {
  preset?: string;
  /** The preset's graph layout; `plain` when omitted. */
  layout?: DecoderLayout;
  pack?: string;
  promptTokens: number;
  /** Decode steps measured in all, spread over `rounds`. */
  steps: number;
  warmup: number;
  /** Each round measures the copy bandwidth, then decodes its share of the steps, so both see the same machine. */
  rounds: number;
  threads: number;
  /** Bytes of each copy buffer: the main thread's, and all workers' together. */
  copyBytes: number;
  /**
   * Copy bandwidth measured elsewhere (GB/s, read + written): no copy buffers are made in this process,
   * so its peak RSS is the model's (`--dtype` runs each type in a child given the parent's figure).
   */
  bandwidthGbS?: number;
  log: (line: string) => void;
}

/**
 * The process's peak resident set so far, in MiB: Linux's VmHWM, since getrusage's ru_maxrss survives
 * exec and a child would report its parent's peak when that was higher.
 */
export function peakRssMb(): number {
  try {
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (hwm) return Number(hwm[1]) / 1024;
  } catch {
    // Not Linux: getrusage is the portable figure.
  }
  return process.resourceUsage().maxRSS / 1024;
}

export async function benchDecode(o: DecodeBenchOptions): Promise<DecodeBenchResult> {
  if (o.steps < 1 || o.promptTokens < 1 || o.warmup < 0 || o.threads < 1 || o.rounds < 1 || o.rounds > o.steps) {
    throw new UsageError('--steps, --prompt-tokens, --rounds and --threads must be at least 1, and --rounds at most --steps');
  }
  const { target, dir } = await resolvePack(o);
  const pack = loadModelPack(dir);
  if (o.promptTokens + o.warmup + o.steps > pack.maxPositions) {
    throw new AppError('INVALID_ARGUMENT', `prompt + warm-up + steps exceed the model's ${pack.maxPositions} positions`);
  }
  const traffic = weightTraffic(pack.modelPath);
  const ids = await promptIds(pack, o.promptTokens);

  const given = o.bandwidthGbS;
  if (given === undefined) o.log(`copy buffers: ${o.copyBytes / 2 ** 20} MiB on this thread, the same split over ${o.threads} workers`);
  const buffers = given === undefined ? copyBuffers(o.copyBytes) : undefined;
  const team = given === undefined ? await CopyTeam.start(o.threads, o.copyBytes / o.threads) : undefined;
  o.log(`loading ${dir} (${(traffic.total / 2 ** 20).toFixed(0)} MiB of weights, ${o.threads} threads)`);
  const loadStart = performance.now();
  const model = await DecoderModel.load(pack, { threads: o.threads });
  const loadMs = performance.now() - loadStart;
  let sequence: DecoderSequence | undefined;
  try {
    const prefills: number[] = [];
    let logits: Float32Array = new Float32Array(0);
    for (let run = 0; run < 4; run++) {
      sequence?.dispose();
      sequence = model.newSequence();
      const t = performance.now();
      ({ logits } = await sequence.append(ids));
      if (run > 0) prefills.push(performance.now() - t);
    }
    o.log(`prefill ${o.promptTokens} tokens: ${median(prefills).toFixed(1)} ms; decoding ${o.warmup} + ${o.steps} steps in ${o.rounds} rounds`);
    const decode = async () => {
      const next = argmax(logits);
      const t = performance.now();
      ({ logits } = await sequence!.append([next]));
      return performance.now() - t;
    };
    for (let i = 0; i < o.warmup; i++) await decode();
    const steps: number[] = [];
    const rounds: DecodeRound[] = [];
    for (let r = 0; r < o.rounds; r++) {
      const singleThreadGbS = buffers ? singleThreadCopyBandwidth(buffers, 3) : given!;
      const allThreadsGbS = team && o.threads > 1 ? await team.measure(600) : singleThreadGbS;
      const mine: number[] = [];
      const count = Math.floor(((r + 1) * o.steps) / o.rounds) - Math.floor((r * o.steps) / o.rounds);
      for (let i = 0; i < count; i++) mine.push(await decode());
      steps.push(...mine);
      rounds.push({ msPerToken: median(mine), singleThreadGbS, allThreadsGbS });
    }
    const singleThread = median(rounds.map((r) => r.singleThreadGbS));
    const allThreads = median(rounds.map((r) => r.allThreadsGbS));
    const bandwidth = Math.max(singleThread, allThreads);
    const msPerToken = median(steps);
    // Step j reads the cache of prompt + warm-up + j tokens plus its own.
    const kvBytes = kvCacheBytes(pack, o.promptTokens + o.warmup + (o.steps + 1) / 2);
    const boundMsPerToken = ((traffic.perToken + kvBytes) / (bandwidth * 1e9)) * 1000;
    return {
      target,
      pack: dir,
      threads: o.threads,
      promptTokens: o.promptTokens,
      steps: o.steps,
      loadMs,
      prefillMs: median(prefills),
      msPerToken,
      msPerTokenP90: percentile(steps, 90),
      tokensPerSecond: 1000 / msPerToken,
      weightBytes: traffic.perToken,
      kvBytes,
      bandwidth: { singleThread, allThreads, used: bandwidth },
      rounds,
      boundMsPerToken,
      fractionOfBound: boundMsPerToken / msPerToken,
      peakRssMb: peakRssMb(),
    };
  } finally {
    sequence?.dispose();
    await model.release();
    team?.close();
  }
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    preset: { type: 'string' },
    pack: { type: 'string' },
    'prompt-tokens': { type: 'string' },
    steps: { type: 'string' },
    warmup: { type: 'string' },
    rounds: { type: 'string' },
    threads: { type: 'string' },
    'copy-mib': { type: 'string' },
    'bandwidth-gb-s': { type: 'string' },
    dtype: { type: 'string' },
    peer: { type: 'string' },
    profile: { type: 'boolean' },
    breakdown: { type: 'boolean' },
    layout: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const threads = integerFlag(values, 'threads', availableParallelism())!;
  const layout = values.layout === undefined ? undefined : parseLayout(values.layout);
  if (values.profile) {
    await profileCommand(values, threads, layout);
    return;
  }
  if (values.breakdown) {
    await breakdownCommand(values, threads, layout);
    return;
  }
  const copyBytes = integerFlag(values, 'copy-mib', 1024)! * 2 ** 20;
  if (values.peer !== undefined && values.peer !== 'llama.cpp') throw new UsageError(`--peer: only llama.cpp is known, got ${JSON.stringify(values.peer)}`);
  if (values.peer !== undefined && values.dtype === undefined) throw new UsageError('--peer needs --dtype (the types to compare)');
  if (values.dtype !== undefined) {
    if (values.pack) throw new UsageError('--dtype works on a --preset (its quantized packs are built under models/bench/)');
    const passOn = (['prompt-tokens', 'steps', 'warmup', 'rounds'] as const).flatMap((f) => (values[f] === undefined ? [] : [`--${f}`, values[f]!]));
    const results = await runDtypes({
      preset: values.preset ?? 'qwen2.5-0.5b',
      layout,
      dtypes: parseDtypes(values.dtype),
      childArgs: [...passOn, '--threads', String(threads)],
      threads,
      copyBytes,
      log: (line) => console.error(line),
    });
    console.log(formatDtypeResults(results));
    const peer = values.peer === undefined ? undefined : await timePeer(values.preset ?? 'qwen2.5-0.5b', results.map((r) => r.dtype), threads, values);
    if (peer) {
      console.log(formatPeerResults(results, peer));
      for (const r of results) {
        const match = peer.find((p) => p.dtype === PEER_TYPES[r.dtype].toLowerCase());
        if (match) r.ratio_to_peer = r.ms_per_token / match.ms_per_token;
      }
    }
    if (values.json) console.log(JSON.stringify({ target: `preset:${values.preset ?? 'qwen2.5-0.5b'}`, threads, results, ...(peer ? { peer } : {}) }));
    return;
  }
  const bandwidth = values['bandwidth-gb-s'] === undefined ? undefined : Number(values['bandwidth-gb-s']);
  if (bandwidth !== undefined && !(bandwidth > 0)) throw new UsageError(`--bandwidth-gb-s must be a positive number, got ${values['bandwidth-gb-s']}`);
  const r = await benchDecode({
    preset: values.preset,
    layout,
    pack: values.pack,
    promptTokens: integerFlag(values, 'prompt-tokens', 100)!,
    steps: integerFlag(values, 'steps', 32)!,
    warmup: integerFlag(values, 'warmup', 4)!,
    rounds: integerFlag(values, 'rounds', 4)!,
    threads,
    copyBytes,
    ...(bandwidth === undefined ? {} : { bandwidthGbS: bandwidth }),
    log: (line) => console.error(line),
  });
  console.log(formatDecodeBench(r));
  if (values.json) {
    console.log(JSON.stringify(decodeBenchJson(r)));
  }
}

/** `--breakdown`: one pack (a --pack, or the preset in its layout), each thread count from 1 to `threads`. */
async function breakdownCommand(values: Record<string, string | boolean | undefined>, threads: number, layout: DecoderLayout | undefined): Promise<void> {
  if (values.dtype !== undefined) throw new UsageError('--breakdown runs one pack: give --pack (a quantized one, for instance) instead of --dtype');
  const log = (line: string) => console.error(line);
  const { target, dir } = await resolvePack({ preset: values.preset as string | undefined, pack: values.pack as string | undefined, layout, log });
  const rows = await decodeBreakdown({
    dir,
    threadCounts: Array.from({ length: threads }, (_, i) => i + 1),
    promptTokens: integerFlag(values, 'prompt-tokens', 100)!,
    steps: integerFlag(values, 'steps', 32)!,
    log,
  });
  console.log(formatBreakdown(rows));
  if (values.json) console.log(JSON.stringify({ target, pack: dir, breakdown: rows }));
}

/** llama.cpp on the preset's weights, with the prompt, warm-up and step counts our children used. */
async function timePeer(preset: string, dtypes: BenchDtype[], threads: number, values: Record<string, string | boolean | undefined>) {
  const log = (line: string) => console.error(line);
  const pack = loadModelPack(await ensureBenchPack(preset, log));
  return runLlamaCppPeer({
    preset,
    dtypes,
    threads,
    promptIds: await promptIds(pack, integerFlag(values, 'prompt-tokens', 100)!),
    warmup: integerFlag(values, 'warmup', 4)!,
    steps: integerFlag(values, 'steps', 32)!,
    log,
  });
}
