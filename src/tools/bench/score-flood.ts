/**
 * `bench score-flood`: whether a tool's teacher forcing starves the generations a shim serves. One real shim
 * (embedded backend, demo cloud pack or --pack, its deployed defaults) runs as a child process (load-shim.ts);
 * this process is `--streams` edges (a GrpcCloudClient each, with its own connection) taking one-token routed
 * steps as bench load's phase 1 does (sessions of real text that churn); in alternating phases of `--seconds`
 * they run alone, then beside a flood of Score calls from a third process (score-flood-child.ts: `--callers`
 * loops of full windows of real text, back to back, as router training sends them).
 *
 * Reports the routed steps' round trips of each condition, pooled over `--rounds`, and p99 beside the flood
 * over p99 alone: target ≤ 2 (the shim serves steps ahead of Score work, score-sequence.ts). Every routed
 * step must be answered with a token (an overloaded or failed step is an error); the Score calls the flood
 * completed show that it was not starved in turn.
 */
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { AppError } from '../../shared/errors.ts';
import { DEMO } from '../../shared/paths.ts';
import { percentile, round } from '../../shared/statistics.ts';
import { integerFlag, parseFlags } from '../cli-support.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { startIpcChild, stopIpcChild } from './ipc-child.ts';
import { ShimChild } from './load-shim-child.ts';
import { loadCorpus, STEPS_PER_SESSION, streamWorker, Tally, type Corpus } from './load-workers.ts';
import type { FloodCount, FloodOptions, FloodReply } from './score-flood-child.ts';

export const USAGE = `bench score-flood [--seconds S] [--rounds R] [--streams G] [--callers F] [--top-k K] [--pack DIR] [--json]
      routed steps through a shim (its own process) alone and beside a flood of Score calls from another
      process, alternating phases: step p50/p99 of each, p99 beside the flood over p99 alone (target ≤ 2)`;

/** The most p99 beside the flood may be, as a multiple of p99 alone. */
export const P99_RATIO_TARGET = 2;

export interface FloodBenchOptions {
  pack: string;
  seconds: number;
  rounds: number;
  streams: number;
  callers: number;
  topK: number;
  log: (line: string) => void;
}

interface PhaseFigures {
  steps: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
}

export interface FloodBenchResult {
  pack: string;
  streams: number;
  callers: number;
  top_k: number;
  seconds: number;
  rounds: number;
  alone: PhaseFigures;
  beside_flood: PhaseFigures & { score_calls: number; score_positions: number; score_errors: number };
  /** beside_flood.p99_ms / alone.p99_ms. */
  p99_ratio: number;
  targets: { p99_within_2x: boolean; every_step_answered: boolean };
  error_messages: string[];
}

/** The Score flood's process: flooding from its ready message until `stop`. */
async function startFlood(options: FloodOptions): Promise<{ stop(): Promise<FloodCount> }> {
  let onStopped: ((count: FloodCount) => void) | undefined;
  const stopped = new Promise<FloodCount>((resolve) => (onStopped = resolve));
  const { child } = await startIpcChild<FloodReply>({
    script: new URL('./score-flood-child.ts', import.meta.url).pathname,
    options,
    name: 'the Score flood',
    onMessage: (reply) => {
      if (reply.type === 'stopped') onStopped!(reply);
    },
  });
  return {
    async stop() {
      child.send({ type: 'stop' });
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        return await Promise.race([
          stopped,
          new Promise<never>(
            (_, reject) => (timer = setTimeout(() => reject(new AppError('DEADLINE_EXCEEDED', 'the Score flood did not stop within 150 s')), 150_000)),
          ),
        ]);
      } finally {
        clearTimeout(timer);
        await stopIpcChild(child);
      }
    },
  };
}

/** Every stream for `seconds`, or `sessions` each (a session under way runs to its last step). */
async function phase(clients: GrpcCloudClient[], corpus: Corpus, tally: Tally, run: { seconds: number } | { sessions: number }): Promise<void> {
  const deadline = 'seconds' in run ? performance.now() + run.seconds * 1000 : Number.POSITIVE_INFINITY;
  const sessions = 'sessions' in run ? run.sessions : Number.MAX_SAFE_INTEGER;
  await Promise.all(clients.map((client, i) => streamWorker(client, corpus, i, deadline, sessions, STEPS_PER_SESSION, tally)));
}

function figures(tally: Tally): PhaseFigures {
  return { steps: tally.stepMs.length, p50_ms: round(percentile(tally.stepMs, 50), 3), p99_ms: round(percentile(tally.stepMs, 99), 3), errors: tally.errors };
}

export async function runFloodBench(o: FloodBenchOptions): Promise<FloodBenchResult> {
  const corpus = await loadCorpus(o.pack);
  o.log(`starting the shim (embedded ${o.pack}) and ${o.streams} edge streams`);
  const { shim, address } = await ShimChild.start({ modelPack: o.pack, maxSessions: Math.max(64, o.streams) });
  const clients = Array.from({ length: o.streams }, () => new GrpcCloudClient({ address, stepTimeoutMs: 30_000 }));
  const alone = new Tally();
  const beside = new Tally();
  const scores: FloodCount = { calls: 0, positions: 0, errors: 0, messages: [] };
  try {
    // Warm-up: channels, sessions and the shim's threads, measured nowhere.
    await phase(clients, corpus, new Tally(), { sessions: 1 });
    for (let r = 0; r < o.rounds; r++) {
      o.log(`round ${r + 1} of ${o.rounds}: ${o.seconds} s alone, then ${o.seconds} s beside ${o.callers} Score callers`);
      await phase(clients, corpus, alone, { seconds: o.seconds });
      const flood = await startFlood({ address, callers: o.callers, pack: o.pack, topK: o.topK });
      try {
        await phase(clients, corpus, beside, { seconds: o.seconds });
      } finally {
        const count = await flood.stop();
        scores.calls += count.calls;
        scores.positions += count.positions;
        scores.errors += count.errors;
        scores.messages.push(...count.messages);
      }
    }
  } finally {
    await Promise.all(clients.map((client) => client.close()));
    await shim.stop();
  }
  const ratio = percentile(beside.stepMs, 99) / percentile(alone.stepMs, 99);
  return {
    pack: o.pack,
    streams: o.streams,
    callers: o.callers,
    top_k: o.topK,
    seconds: o.seconds,
    rounds: o.rounds,
    alone: figures(alone),
    beside_flood: { ...figures(beside), score_calls: scores.calls, score_positions: scores.positions, score_errors: scores.errors },
    p99_ratio: round(ratio, 3),
    targets: { p99_within_2x: ratio <= P99_RATIO_TARGET, every_step_answered: alone.errors + beside.errors === 0 },
    error_messages: [...new Set([...alone.messages, ...beside.messages, ...scores.messages])].slice(0, 5),
  };
}

export function formatFloodBench(r: FloodBenchResult): string {
  const row = (name: string, p: PhaseFigures) =>
    `  ${name.padEnd(22)} ${String(p.steps).padStart(7)} steps   p50 ${p.p50_ms.toFixed(2).padStart(7)} ms   p99 ${p.p99_ms.toFixed(2).padStart(7)} ms   errors ${p.errors}`;
  const f = r.beside_flood;
  return [
    `routed steps of ${r.streams} edge streams through a shim (${r.pack}), ${r.rounds} × ${r.seconds} s each way`,
    row('alone', r.alone),
    row(`beside ${r.callers} Score callers`, f),
    `  p99 beside the flood / alone   ${r.p99_ratio.toFixed(2)}× (target ≤ ${P99_RATIO_TARGET}: ${r.targets.p99_within_2x ? 'met' : 'missed'})`,
    `  the flood: ${f.score_calls} Score calls (${f.score_positions} positions, top ${r.top_k}), ${f.score_errors} failed`,
    ...r.error_messages.map((m) => `  error: ${m}`),
  ].join('\n');
}

export async function main(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    seconds: { type: 'string' },
    rounds: { type: 'string' },
    streams: { type: 'string' },
    callers: { type: 'string' },
    'top-k': { type: 'string' },
    pack: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (!values.pack) await buildDemoPacks();
  const result = await runFloodBench({
    pack: values.pack ?? DEMO.cloudPack,
    seconds: integerFlag(values, 'seconds', 5, [1, 600])!,
    rounds: integerFlag(values, 'rounds', 2, [1, 20])!,
    streams: integerFlag(values, 'streams', 4, [1, 256])!,
    callers: integerFlag(values, 'callers', 6, [1, 64])!,
    topK: integerFlag(values, 'top-k', 20, [0, 20])!,
    log: (line) => console.error(line),
  });
  console.log(formatFloodBench(result));
  if (values.json) console.log(JSON.stringify(result));
}
