/**
 * `bench decode`'s result for one pack: decode speed, prefill, the bytes read per token and the
 * bandwidth bound, as text lines and as the JSON object `--json` prints.
 *
 * @example
 * console.log(formatDecodeBench(result));
 * console.log(JSON.stringify(decodeBenchJson(result)));
 */

export interface DecodeRound {
  msPerToken: number;
  singleThreadGbS: number;
  allThreadsGbS: number;
  /** The weight products alone after the round's steps (`kernelFloor`), median ms of a pass. */
  kernelFloorMs?: number;
}

export interface DecodeBenchResult {
  target: string;
  pack: string;
  threads: number;
  promptTokens: number;
  steps: number;
  loadMs: number;
  prefillMs: number;
  /** Median over all measured steps. */
  msPerToken: number;
  msPerTokenP90: number;
  /** The fastest step: the machine's quietest moment. */
  minMsPerToken: number;
  tokensPerSecond: number;
  /** Weight bytes read per token, KV-cache bytes read per token (mean over the measured steps). */
  weightBytes: number;
  kvBytes: number;
  /** Copy bandwidth (read + written), medians over the rounds; the bound uses the larger. */
  bandwidth: { singleThread: number; allThreads: number; used: number };
  rounds: DecodeRound[];
  boundMsPerToken: number;
  /** bound / measured: 1 = as fast as memory allows. */
  fractionOfBound: number;
  /** Median over the rounds of the weight products alone (decode-kernel-floor.ts), where asked for. */
  kernelFloorMs?: number;
  /** Peak resident set of this process (copy buffers included unless `bandwidthGbS` was given). */
  peakRssMb: number;
}

export function formatDecodeBench(r: DecodeBenchResult): string {
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  return [
    `target ${r.target} (${r.pack}), ${r.threads} threads`,
    `prefill ${r.promptTokens} tokens: ${r.prefillMs.toFixed(1)} ms`,
    `decode: ${r.msPerToken.toFixed(2)} ms/token median (p90 ${r.msPerTokenP90.toFixed(2)}, fastest ${r.minMsPerToken.toFixed(2)}) over ${r.steps} steps = ${r.tokensPerSecond.toFixed(1)} tokens/s`,
    `read per token: weights ${mib(r.weightBytes)} + KV cache ${mib(r.kvBytes)}`,
    `copy bandwidth (read + write, median of ${r.rounds.length} rounds): ${r.bandwidth.singleThread.toFixed(1)} GB/s on 1 thread, ${r.bandwidth.allThreads.toFixed(1)} GB/s on ${r.threads}; bound uses ${r.bandwidth.used.toFixed(1)} GB/s`,
    `rounds (ms/token, GB/s 1 thread, GB/s all): ${r.rounds.map((x) => `${x.msPerToken.toFixed(1)}/${x.singleThreadGbS.toFixed(1)}/${x.allThreadsGbS.toFixed(1)}`).join('  ')}`,
    `bound: ${r.boundMsPerToken.toFixed(2)} ms/token; measured reaches ${(100 * r.fractionOfBound).toFixed(0)}% of it`,
    ...(r.kernelFloorMs === undefined
      ? []
      : [`kernel floor (the weight products alone): ${r.kernelFloorMs.toFixed(2)} ms, ${(100 * (r.kernelFloorMs / r.msPerToken)).toFixed(0)}% of a step`]),
  ].join('\n');
}

/** The result as `--json` prints it (snake_case, bandwidths in GB/s). */
export function decodeBenchJson(r: DecodeBenchResult): Record<string, unknown> {
  return {
    target: r.target,
    threads: r.threads,
    ms_per_token: r.msPerToken,
    ms_per_token_p90: r.msPerTokenP90,
    min_ms_per_token: r.minMsPerToken,
    bound_ms_per_token: r.boundMsPerToken,
    fraction_of_bound: r.fractionOfBound,
    tokens_per_second: r.tokensPerSecond,
    prefill_ms: r.prefillMs,
    prompt_tokens: r.promptTokens,
    bandwidth_gb_s: r.bandwidth.used,
    bandwidth_counting: 'copy bytes read + written',
    single_thread_bandwidth_gb_s: r.bandwidth.singleThread,
    all_threads_bandwidth_gb_s: r.bandwidth.allThreads,
    weight_bytes: r.weightBytes,
    kv_bytes: r.kvBytes,
    load_ms: r.loadMs,
    peak_rss_mb: r.peakRssMb,
    ...(r.kernelFloorMs === undefined ? {} : { kernel_floor_ms: r.kernelFloorMs }),
    rounds: r.rounds.map((x) => ({
      ms_per_token: x.msPerToken,
      single_thread_gb_s: x.singleThreadGbS,
      all_threads_gb_s: x.allThreadsGbS,
      ...(x.kernelFloorMs === undefined ? {} : { kernel_floor_ms: x.kernelFloorMs }),
    })),
  };
}
