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
 * stream and generation slot used once) and after both phases, each right after a forced GC in the
 * shim; the shim must then hold no session, no context token and no stream. The load generator's own
 * RSS (edge models, clients) is reported beside it as `load_rss_*`.
 */
import { availableParallelism } from 'node:os';
import type { ShimConfig } from '../../cloud/config.ts';
import type { TokenSource } from '../../shared/contract-vocabulary.ts';
import type { DoneEvent } from '../../edge/decoder-loop.ts';
import { EdgeRuntime } from '../../edge/edge-runtime.ts';
import { DEFAULT_LIMITS } from '../../edge/generation-request.ts';
import { percentile, round } from '../../shared/statistics.ts';
import { GrpcCloudClient } from '../../edge/grpc-cloud-client.ts';
import { loadEdgeEngine, type LoadedEdgeEngine } from '../../edge/load-edge-engine.ts';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { DEMO } from '../../shared/paths.ts';
import { TextTokenizer } from '../../shared/tokenizer.ts';
import type { ShimChildReply, ShimChildRequest, ShimStats } from './load-shim.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { buildDemoPacks } from '../models/demo.ts';

export const USAGE = `bench load [--duration S] [--streams N] [--generations G] [--json]
      concurrent edge streams of routed steps against one shim (sessions churn) for S seconds, then G
      concurrent joint generations on one edge; errors, step p50/p99, shim RSS before and after`;

/** Routed steps per session before it is closed and a fresh one opened. */
const STEPS_PER_SESSION = 32;
/** Prompt windows of 24 to 87 tokens (plus BOS): sessions of different sizes. */
const MIN_PROMPT_TOKENS = 24;
const PROMPT_SPREAD = 64;
const GENERATION_MAX_NEW_TOKENS = 48;
/**
 * The demo router scores most tokens below this, so most of a generation's tokens go to the shim (about
 * 80% of generated tokens on held-out prompts, docs/results.md).
 */
const GENERATION_THRESHOLD = 0.95;
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

/** The shim child process and its IPC channel. */
class ShimChild {
  private readonly waiting = new Map<number, (stats: ShimStats) => void>();
  private nextId = 0;
  private onReady: ((reply: ShimChildReply) => void) | undefined;

  private constructor(private readonly child: ReturnType<typeof Bun.spawn>) {}

  static async start(overrides: Partial<ShimConfig>, timeoutMs = 120_000): Promise<{ shim: ShimChild; address: string }> {
    let shim: ShimChild | undefined;
    const child = Bun.spawn([process.execPath, new URL('./load-shim.ts', import.meta.url).pathname, JSON.stringify(overrides)], {
      stdin: 'ignore',
      stdout: 'inherit',
      stderr: 'inherit',
      serialization: 'json',
      ipc: (reply: ShimChildReply) => shim?.receive(reply),
    });
    shim = new ShimChild(child);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const reply = await Promise.race([
        new Promise<ShimChildReply>((resolve) => (shim.onReady = resolve)),
        child.exited.then((code): ShimChildReply => ({ type: 'failed', message: `the shim process exited with code ${code}` })),
        new Promise<ShimChildReply>((resolve) => (timer = setTimeout(() => resolve({ type: 'failed', message: `the shim did not start within ${timeoutMs} ms` }), timeoutMs))),
      ]);
      if (reply.type !== 'ready') throw new AppError('UNAVAILABLE', reply.type === 'failed' ? reply.message : 'unexpected message from the shim');
      return { shim, address: reply.address };
    } catch (e) {
      await shim.stop();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The shim's memory and what it holds, after a forced GC there. */
  async stats(timeoutMs = 10_000): Promise<ShimStats> {
    const id = this.nextId++;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await new Promise<ShimStats>((resolve, reject) => {
        this.waiting.set(id, resolve);
        timer = setTimeout(() => reject(new AppError('DEADLINE_EXCEEDED', `the shim did not report its stats within ${timeoutMs} ms`)), timeoutMs);
        this.send({ type: 'stats', id });
      });
    } finally {
      clearTimeout(timer);
      this.waiting.delete(id);
    }
  }

  /** Asks the shim to shut down; kills it when it has not exited within `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      try {
        this.send({ type: 'stop' });
      } catch {
        // The channel is already gone: the kill below ends it.
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exited = await Promise.race([this.child.exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
    clearTimeout(timer);
    if (!exited) {
      this.child.kill('SIGKILL');
      await this.child.exited;
    }
  }

  private send(request: ShimChildRequest): void {
    this.child.send(request);
  }

  private receive(reply: ShimChildReply): void {
    if (reply.type === 'stats') {
      const { type: _type, id, ...stats } = reply;
      this.waiting.get(id)?.(stats);
    } else {
      this.onReady?.(reply);
    }
  }
}

/** Counters of one phase, shared by its workers. */
class Tally {
  completed = 0;
  sessions = 0;
  errors = 0;
  tokens = 0;
  routed = 0;
  readonly stepMs: number[] = [];
  readonly messages = new Set<string>();

  fail(e: unknown): void {
    this.errors++;
    if (this.messages.size < 5) this.messages.add(errorMessage(e));
  }
}

/** Real text: the TinyStories excerpt as token ids, and its stories' opening sentences as prompts. */
interface Corpus {
  bos: number;
  ids: number[];
  prompts: string[];
}

async function loadCorpus(pack: string): Promise<Corpus> {
  const tokenizer = await TextTokenizer.fromPack(pack);
  const text = await Bun.file(DEMO.tinyStories).text();
  const ids = tokenizer.encode(text.slice(0, 40_000), { addBos: false });
  const prompts = text
    .split('\n\n')
    .slice(0, 200)
    .map((paragraph) => paragraph.trim().split(/(?<=[.!?])\s/)[0]!)
    .filter((sentence) => sentence.length >= 20 && sentence.length <= 200);
  if (tokenizer.bosId === undefined || ids.length < 1_000 || prompts.length < 10) {
    throw new AppError('FAILED_PRECONDITION', `${DEMO.tinyStories} or ${pack} does not give enough text to load with`);
  }
  return { bos: tokenizer.bosId, ids, prompts };
}

/**
 * One edge stream: sessions of STEPS_PER_SESSION routed steps each until `deadline` or `maxSessions`.
 * Between steps the context grows by the shim's token and the next token of the text (the edge's).
 */
async function streamWorker(client: GrpcCloudClient, corpus: Corpus, index: number, deadline: number, maxSessions: number, steps: number, tally: Tally): Promise<void> {
  const room = corpus.ids.length - MIN_PROMPT_TOKENS - PROMPT_SPREAD - steps;
  for (let s = 0; s < maxSessions && performance.now() < deadline; s++) {
    const promptLength = MIN_PROMPT_TOKENS + ((index * 7 + s) % PROMPT_SPREAD);
    const start = (index * 997 + s * 131) % room;
    const context = [corpus.bos, ...corpus.ids.slice(start, start + promptLength)];
    const sources: TokenSource[] = context.map(() => 'prompt');
    let edgeAt = start + promptLength;
    const session = client.openConversation({ requestId: `load-${index}-${s}` });
    try {
      for (let k = 0; k < steps; k++) {
        const started = performance.now();
        const reply = await session.next({ context, sources, tokenIndex: k, maxTokens: 1, temperature: 0, topP: 1, stopTokenIds: [], routerScore: 0.2, threshold: 0.5, topLogprobs: 0 });
        tally.stepMs.push(performance.now() - started);
        if (reply.tokens.length !== 1) throw new AppError('INTERNAL', `a one-token step returned ${reply.tokens.length} tokens`);
        tally.completed++;
        context.push(reply.tokens[0]!, corpus.ids[edgeAt++]!);
        sources.push('llm', 'slm');
      }
      tally.sessions++;
    } catch (e) {
      tally.fail(e);
      return;
    } finally {
      await session.close();
    }
  }
}

/** One generation slot of the edge: joint generations back to back until `deadline` or `maxGenerations`. */
async function generationWorker(runtime: EdgeRuntime, corpus: Corpus, index: number, deadline: number, maxGenerations: number, maxNewTokens: number, tally: Tally): Promise<void> {
  for (let g = 0; g < maxGenerations && performance.now() < deadline; g++) {
    const prompt = corpus.prompts[(index * 17 + g) % corpus.prompts.length]!;
    try {
      const { events } = runtime.start({ prompt, mode: 'joint', threshold: GENERATION_THRESHOLD, maxNewTokens, seed: index });
      let done: DoneEvent | undefined;
      let fallbackError: string | undefined;
      for await (const event of events()) {
        if (event.type === 'done') done = event;
        else if (event.source === 'fallback') fallbackError ??= event.cloudError ?? 'the cloud did not serve a routed token';
        // A span's later tokens carry no timing: only the step's first token measures the round trip.
        else if (event.source === 'llm' && event.score !== null) tally.stepMs.push(event.timings.cloudMs);
      }
      if (fallbackError !== undefined) throw new AppError('UNAVAILABLE', `fallback token: ${fallbackError}`);
      if (!done || done.finishReason === 'cancelled') throw new AppError('CANCELLED', 'the generation did not finish');
      tally.completed++;
      tally.tokens += done.metrics.tokens;
      tally.routed += done.metrics.routed;
    } catch (e) {
      tally.fail(e);
      return;
    }
  }
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
    parts = await loadEdgeEngine({ slm: DEMO.edgePack, threads: ORT_THREADS, router: DEMO.routerPack });
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
    log(`shim RSS after warm-up: ${start.rssMb.toFixed(1)} MB (load process ${loadStart.toFixed(1)} MB)`);

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
    return {
      completed: streamTally.completed + generationTally.completed,
      errors,
      p50_ms: round(percentile(streamTally.stepMs, 50)),
      p99_ms: round(percentile(streamTally.stepMs, 99)),
      rss_start_mb: round(start.rssMb, 1),
      rss_end_mb: round(end.rssMb, 1),
      rss_process: 'shim',
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
