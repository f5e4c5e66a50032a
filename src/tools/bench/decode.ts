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
import { availableParallelism } from 'node:os';
import { formatDtypeResults, runDtypes } from './decode-dtypes.ts';
import { parseDtypes } from './decode-packs.ts';
import type { BenchLayout } from '../models/random-pack.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { parseLayout, profileCommand } from './decode-profile.ts';
import { decodeBreakdown, formatBreakdown } from './decode-breakdown.ts';
import { resolvePack } from './decode-target.ts';
import { roundStepCounts } from './alternating-rounds.ts';
import { compareWithLlamaCpp, formatPeerComparison } from './decode-peer.ts';
import { DecodeSession } from './decode-session.ts';

export { promptIds } from './decode-target.ts';
import { decodeBenchJson, formatDecodeBench, type DecodeBenchResult } from './decode-report.ts';

export const USAGE = `bench decode [--preset qwen2.5-0.5b | --pack DIR] [--layout plain|fused|fused-matmul] [--dtype fp32,int8,q4] [--prompt-tokens 100] [--steps 32] [--warmup 4] [--rounds 4] [--threads N] [--copy-mib 1024] [--bandwidth-gb-s X] [--peer llama.cpp] [--kernel-floor] [--profile] [--breakdown] [--json]
      edge decode ms/token and prefill time next to the memory-bandwidth bound (weights + KV cache
      read per token / measured copy bandwidth); a preset is built once under models/bench/; --dtype
      runs each weight type of the preset (quantized once with models quantize) in its own process and
      adds its peak RSS; --bandwidth-gb-s skips the copy measurement and uses the given figure;
      --peer llama.cpp (with --dtype) also times llama.cpp on the same weights as GGUF (F32, Q8_0, Q4_0)
      through node-llama-cpp under node, installed on first use into ~/.cache/edge-token-router: both
      stay loaded in processes of their own and decode in alternating rounds (ours, llama.cpp, ours, ...),
      reported as the ratio of the medians and the median (min-max) of the per-round ratios, with our
      kernel floor beside them; --kernel-floor (and --peer) ends each of our rounds by timing the pack's
      weight products alone (every MatMulNBits, MatMul or Gemm on a weight, one row each): no graph on
      these kernels decodes faster;
      --profile runs --steps decode steps under onnxruntime's profiler instead and prints nodes per
      step, time per op type, the share outside the matrix products and the KV bytes copied per step
      (with --dtype: each type's pack in turn); --layout fused builds the preset in onnxruntime's fused
      layout (models/bench/<preset>-fused[-<dtype>]), fused-matmul in it with decode steps through standard
      ops (models random --decode-attention matmul); --breakdown times, for 1 up to --threads intra-op
      threads, the step inside and outside onnxruntime's run, and the loop's per-token work after it
      (argmax over the logits, a sampled pick, a router call)`;

export interface DecodeBenchOptions {
  preset?: string;
  /** The preset's graph layout; `plain` when omitted. */
  layout?: BenchLayout;
  pack?: string;
  promptTokens: number;
  /** Decode steps measured in all, spread over `rounds`. */
  steps: number;
  warmup: number;
  /** Each round measures the copy bandwidth, then decodes its share of the steps, so both see the same machine. */
  rounds: number;
  /** Each round ends with the pack's weight products alone (decode-kernel-floor.ts). */
  kernelFloor?: boolean;
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

export async function benchDecode(o: DecodeBenchOptions): Promise<DecodeBenchResult> {
  if (o.steps < 1 || o.promptTokens < 1 || o.warmup < 0 || o.threads < 1 || o.rounds < 1 || o.rounds > o.steps) {
    throw new UsageError('--steps, --prompt-tokens, --rounds and --threads must be at least 1, and --rounds at most --steps');
  }
  const { target, dir } = await resolvePack(o);
  const session = await DecodeSession.open({ ...o, target, dir, plannedSteps: o.warmup + o.steps });
  try {
    o.log(`decoding ${o.warmup} + ${o.steps} steps in ${o.rounds} rounds`);
    await session.warmUp(o.warmup);
    for (const count of roundStepCounts(o.steps, o.rounds)) await session.runRound(count);
    return session.result();
  } finally {
    await session.close();
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
    'kernel-floor': { type: 'boolean' },
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
    const preset = values.preset ?? 'qwen2.5-0.5b';
    const log = (line: string) => console.error(line);
    const dtypes = parseDtypes(values.dtype);
    if (values.peer !== undefined) {
      const counts = {
        promptTokens: integerFlag(values, 'prompt-tokens', 100, [1, 32768])!,
        steps: integerFlag(values, 'steps', 32, [1, 32768])!,
        warmup: integerFlag(values, 'warmup', 4, [0, 32768])!,
      };
      const rounds = integerFlag(values, 'rounds', 4, [1, counts.steps])!;
      const { results, peer } = await compareWithLlamaCpp({ preset, layout, dtypes, threads, copyBytes, ...counts, rounds, log });
      console.log(formatDtypeResults(results));
      console.log(formatPeerComparison(results, peer));
      if (values.json) console.log(JSON.stringify({ target: `preset:${preset}`, threads, results, peer }));
      return;
    }
    const passOn = (['prompt-tokens', 'steps', 'warmup', 'rounds'] as const).flatMap((f) => (values[f] === undefined ? [] : [`--${f}`, values[f]!]));
    const floorFlag = values['kernel-floor'] ? ['--kernel-floor'] : [];
    const results = await runDtypes({ preset, layout, dtypes, childArgs: [...passOn, ...floorFlag, '--threads', String(threads)], threads, copyBytes, log });
    console.log(formatDtypeResults(results));
    if (values.json) console.log(JSON.stringify({ target: `preset:${preset}`, threads, results }));
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
    kernelFloor: values['kernel-floor'] === true,
    log: (line) => console.error(line),
  });
  console.log(formatDecodeBench(r));
  if (values.json) {
    console.log(JSON.stringify(decodeBenchJson(r)));
  }
}

/** `--breakdown`: one pack (a --pack, or the preset in its layout), each thread count from 1 to `threads`. */
async function breakdownCommand(values: Record<string, string | boolean | undefined>, threads: number, layout: BenchLayout | undefined): Promise<void> {
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
