/**
 * `bench load`: the shim and the edge under sustained concurrent load, on loopback only, bounded in time
 * and in count. One real shim (embedded backend, demo cloud pack) runs as a child process
 * (load-shim.ts) so that its memory is measured on its own; this process is the load generator.
 *
 * - Phase 1, edge streams: `--streams` GrpcCloudClients (64 by default), each with its own HTTP/2
 *   connection like as many edge boxes, run for `--duration` seconds. Each opens a session on a window of
 *   real text (the TinyStories excerpt), takes one-token routed steps, appending the shim's token and one
 *   edge token between steps as the decoding loop does, closes the session after STEPS_PER_SESSION steps
 *   and opens a fresh one, so sessions churn and must be freed. Every step's round trip is recorded.
 * - Phase 2, one edge: an EdgeRuntime (demo edge pack, trained router, a GrpcCloudClient to the same
 *   shim) runs `--generations` concurrent joint-mode generations (8 by default) back to back for
 *   `--duration` seconds, at a threshold at which the router sends a large share of tokens to the cloud.
 *
 * Errors: a routed step or session close that throws; a generation that throws, ends `cancelled`, or
 * emitted any `fallback` token (the cloud failed it). A stream or generation worker stops at its first
 * error, so a broken shim shows as at most one error per worker instead of a flood.
 *
 * Memory: `rss_start_mb` / `rss_end_mb` are the shim process's resident set after a warm-up (every
 * stream and generation slot used once) and after both phases, each after a forced GC in the shim, once
 * the allocator has returned the memory it freed (load-shim.ts, settledRss); the shim must then hold no
 * session, no context token and no stream. Part of that RSS is meant to stay: the prefix cache
 * (`--prefix-cache-mb`, 512 MB by default) keeps the KV caches of closed sessions, so
 * `prefix_cache_mb_start` / `prefix_cache_mb_end` are its bytes at the same moments (its own count,
 * `prefix_cache_bytes_*` exactly), and `rss_end_net_of_cache_mb` is the end's RSS less them: what would
 * be a leak. Target: at most RSS_NET_GROWTH_TARGET (1.5) × `rss_start_mb`, the ratio being
 * `rss_net_growth`. The load generator's own RSS (edge models, clients) is reported beside it as
 * `load_rss_*`.
 */
import { availableParallelism } from 'node:os';
import { EdgeRuntime } from '../../edge/edge-runtime.ts';
import { DEFAULT_LIMITS } from '../../edge/request/generation-request.ts';
import { percentile, round } from '../../shared/statistics.ts';
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { loadEdgeEngine, type LoadedEdgeEngine } from '../../edge/server/load-edge-engine.ts';
import { DEMO } from '../../shared/paths.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { ShimChild } from './load-shim-child.ts';
import { generationWorker, GENERATION_MAX_NEW_TOKENS, loadCorpus, STEPS_PER_SESSION, streamWorker, Tally } from './load-workers.ts';

export const USAGE = `bench load [--duration S] [--streams N] [--generations G] [--json]
      concurrent edge streams of routed steps against one shim (sessions churn) for S seconds, then G
      concurrent joint generations on one edge; errors, step p50/p99, shim RSS before and after and
      its prefix cache's share of it`;

/** The most the shim's RSS at the end, less its prefix cache, may be as a multiple of its RSS after warm-up. */
export const RSS_NET_GROWTH_TARGET = 1.5;

/** onnxruntime threads per forward pass, shim and edge: concurrency comes from the many sessions. */
const ORT_THREADS = 1;
const MB = 1024 * 1024;

export interface LoadOptions {
  durationS: number;
  streams: number;
  generations: number;
  log: (line: string) => void;
}

export interface LoadResult {
  /** Routed steps (phase 1) plus generations (phase 2) that completed without error. */
  completed: number;
  /** stream_errors + generation_errors (warm-up included). */
  errors: number;
  /** Round trip of a one-token routed step as a phase-1 edge stream's client sees it. */
  p50_ms: number;
  p99_ms: number;
  /** The shim process (a child of the benchmark): after warm-up, and after the load with everything closed. */
  rss_start_mb: number;
  rss_end_mb: number;
  rss_process: 'shim';
  /** The shim's prefix cache at the same two moments, in MB, and exactly as its PrefixCache counts it. */
  prefix_cache_mb_start: number;
  prefix_cache_mb_end: number;
  prefix_cache_bytes_start: number;
  prefix_cache_bytes_end: number;
  /** rss_end_mb − prefix_cache_mb_end: what the shim holds beyond the cache it is meant to keep. */
  rss_end_net_of_cache_mb: number;
  /** rss_end_net_of_cache_mb / rss_start_mb; at most RSS_NET_GROWTH_TARGET. */
  rss_net_growth: number;
  duration_s: number;
  streams: number;
  routed_steps: number;
  /** Wall time of phase 1: sessions started before the deadline run to their last step. */
  phase1_s: number;
  steps_per_s: number;
  sessions: number;
  stream_errors: number;
  generations_concurrent: number;
  generations: number;
  generation_errors: number;
  generation_tokens: number;
  generation_routed_tokens: number;
  /** Round trip of a routed step as the edge's decoding loop sees it (phase 2). */
  generation_step_p50_ms: number;
  generation_step_p99_ms: number;
  /** What the shim holds at the end: all must be 0. */
  shim_sessions_end: number;
  shim_context_tokens_end: number;
  shim_streams_end: number;
  shim_evictions: number;
  /** This process: edge models, router, clients. */
  load_rss_start_mb: number;
  load_rss_end_mb: number;
  error_messages: string[];
}

function loadRssMb(): number {
  Bun.gc(true);
  return process.memoryUsage().rss / MB;
}

export async function runLoadBench(options: LoadOptions): Promise<LoadResult> {
  const { durationS, streams, generations, log } = options;
  const corpus = await loadCorpus(DEMO.cloudPack);
  // Phases run one after the other, so the larger of the two is the most sessions the shim holds at
  // once: the cap is exactly that, so a session that outlives its stream shows up as RESOURCE_EXHAUSTED.
  const cap = Math.max(streams, generations);
  log(`starting the shim (embedded ${DEMO.cloudPack}, at most ${cap} sessions) and the edge (${DEMO.edgePack}, router ${DEMO.routerPack})`);
  const { shim, address } = await ShimChild.start({ modelPack: DEMO.cloudPack, threads: ORT_THREADS, maxSessions: cap, maxLiveSequences: cap });
  const clients: GrpcCloudClient[] = [];
  let runtime: EdgeRuntime | undefined;
  let parts: LoadedEdgeEngine | undefined;
  try {
    parts = await loadEdgeEngine({ edgeModel: DEMO.edgePack, threads: ORT_THREADS, router: DEMO.routerPack });
    runtime = new EdgeRuntime({ ...parts, cloud: new GrpcCloudClient({ address }) }, { ...DEFAULT_LIMITS, maxConcurrent: generations });
    // Each client its own connection, as separate edge boxes would have.
    for (let i = 0; i < streams; i++) clients.push(new GrpcCloudClient({ address, ownConnection: true }));

    const streamTally = new Tally();
    const generationTally = new Tally();
    // The count bounds (one session, or one generation per slot, per millisecond) are far
    // beyond what loopback allows: the deadline ends a phase, the counts only back it up.
    const runStreams = (seconds: number, maxSessions: number, steps: number, tally: Tally) => {
      const deadline = performance.now() + seconds * 1000;
      return Promise.all(clients.map((client, i) => streamWorker(client, corpus, i, deadline, maxSessions, steps, tally)));
    };
    const runGenerations = (seconds: number, maxGenerations: number, maxNewTokens: number, tally: Tally) => {
      const deadline = performance.now() + seconds * 1000;
      return Promise.all(Array.from({ length: generations }, (_, i) => generationWorker(runtime!, corpus, i, deadline, maxGenerations, maxNewTokens, tally)));
    };

    // Warm-up: every connection, session slot and KV cache used once, so RSS at the start already
    // includes what a steady load needs. Warm-up errors count; its steps and generations do not.
    log('warm-up');
    const warmUp = new Tally();
    await runStreams(durationS, 1, 4, warmUp);
    await runGenerations(durationS, 1, 8, warmUp);
    const start = await shim.stats();
    const loadStart = loadRssMb();
    log(
      `shim RSS after warm-up: ${start.rssMb.toFixed(1)} MB, ${(start.prefixCacheBytes / MB).toFixed(1)} MB of it the prefix cache (load process ${loadStart.toFixed(1)} MB)`,
    );

    log(`phase 1: ${streams} edge streams for ${durationS} s`);
    const phase1Start = performance.now();
    await runStreams(durationS, durationS * 1000, STEPS_PER_SESSION, streamTally);
    // Sessions started before the deadline finish their steps, so the phase runs a little longer.
    const phase1S = (performance.now() - phase1Start) / 1000;
    log(`phase 2: ${generations} concurrent generations on one edge for ${durationS} s`);
    await runGenerations(durationS, durationS * 1000, GENERATION_MAX_NEW_TOKENS, generationTally);

    await Promise.all(clients.map((client) => client.close()));
    const end = await shim.stats();
    const loadEnd = loadRssMb();
    const errors = warmUp.errors + streamTally.errors + generationTally.errors;
    // The net figure comes from the rounded ones, so the JSON's fields add up exactly.
    const rssStartMb = round(start.rssMb, 1);
    const rssEndMb = round(end.rssMb, 1);
    const cacheEndMb = round(end.prefixCacheBytes / MB, 1);
    const netEndMb = round(rssEndMb - cacheEndMb, 1);
    return {
      completed: streamTally.completed + generationTally.completed,
      errors,
      p50_ms: round(percentile(streamTally.stepMs, 50)),
      p99_ms: round(percentile(streamTally.stepMs, 99)),
      rss_start_mb: rssStartMb,
      rss_end_mb: rssEndMb,
      rss_process: 'shim',
      prefix_cache_mb_start: round(start.prefixCacheBytes / MB, 1),
      prefix_cache_mb_end: cacheEndMb,
      prefix_cache_bytes_start: start.prefixCacheBytes,
      prefix_cache_bytes_end: end.prefixCacheBytes,
      rss_end_net_of_cache_mb: netEndMb,
      rss_net_growth: round(netEndMb / rssStartMb, 2),
      duration_s: durationS,
      streams,
      routed_steps: streamTally.completed,
      phase1_s: round(phase1S, 2),
      steps_per_s: round(streamTally.completed / phase1S, 1),
      sessions: streamTally.sessions,
      stream_errors: warmUp.errors + streamTally.errors,
      generations_concurrent: generations,
      generations: generationTally.completed,
      generation_errors: generationTally.errors,
      generation_tokens: generationTally.tokens,
      generation_routed_tokens: generationTally.routed,
      generation_step_p50_ms: round(percentile(generationTally.stepMs, 50)),
      generation_step_p99_ms: round(percentile(generationTally.stepMs, 99)),
      shim_sessions_end: end.sessions,
      shim_context_tokens_end: end.contextTokens,
      shim_streams_end: end.streams,
      shim_evictions: end.evictions,
      load_rss_start_mb: round(loadStart, 1),
      load_rss_end_mb: round(loadEnd, 1),
      error_messages: [...new Set([...warmUp.messages, ...streamTally.messages, ...generationTally.messages])],
    };
  } finally {
    await runtime?.shutdown();
    await Promise.allSettled(clients.map((client) => client.close()));
    await parts?.release();
    await shim.stop();
  }
}

export function formatLoadBench(r: LoadResult): string {
  const routedShare = r.generation_tokens ? r.generation_routed_tokens / r.generation_tokens : 0;
  const rows: [string, string][] = [
    ['edge streams × duration', `${r.streams} × ${r.duration_s} s`],
    ['routed steps completed', `${r.routed_steps} (${r.steps_per_s}/s, ${r.sessions} sessions)`],
    ['routed step round trip p50 / p99', `${r.p50_ms.toFixed(3)} / ${r.p99_ms.toFixed(3)} ms`],
    ['concurrent generations on one edge', `${r.generations_concurrent}`],
    ['generations completed', `${r.generations} (${r.generation_tokens} tokens, ${(routedShare * 100).toFixed(1)}% routed)`],
    ['  routed step in the loop p50 / p99', `${r.generation_step_p50_ms.toFixed(3)} / ${r.generation_step_p99_ms.toFixed(3)} ms`],
    ['errors (streams + generations)', `${r.errors} (${r.stream_errors} + ${r.generation_errors})`],
    ['shim RSS after warm-up → after load', `${r.rss_start_mb.toFixed(1)} → ${r.rss_end_mb.toFixed(1)} MB`],
    ['  of it the prefix cache', `${r.prefix_cache_mb_start.toFixed(1)} → ${r.prefix_cache_mb_end.toFixed(1)} MB`],
    [
      '  after load, net of the prefix cache',
      `${r.rss_end_net_of_cache_mb.toFixed(1)} MB, ${r.rss_net_growth.toFixed(2)}× the start (target ≤ ${RSS_NET_GROWTH_TARGET})`,
    ],
    ['load process RSS (edge, clients)', `${r.load_rss_start_mb.toFixed(1)} → ${r.load_rss_end_mb.toFixed(1)} MB`],
    ['shim at the end: sessions, tokens, streams', `${r.shim_sessions_end}, ${r.shim_context_tokens_end}, ${r.shim_streams_end}`],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines = [`load benchmark over loopback gRPC (${availableParallelism()} cores)`, ...rows.map(([n, v]) => `  ${n.padEnd(width)}  ${v}`)];
  for (const message of r.error_messages) lines.push(`  error: ${message}`);
  return lines.join('\n');
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    duration: { type: 'string' },
    streams: { type: 'string' },
    generations: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const options: LoadOptions = {
    durationS: integerFlag(values, 'duration', 30, [1, 300])!,
    streams: integerFlag(values, 'streams', 64, [1, 256])!,
    generations: integerFlag(values, 'generations', 8, [1, 64])!,
    log: (line) => console.error(line),
  };
  await buildDemoPacks();
  const result = await runLoadBench(options);
  console.log(formatLoadBench(result));
  if (values.json) console.log(JSON.stringify(result));
}
