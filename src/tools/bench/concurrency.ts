/**
 * `bench concurrency`: several users generating at once on one edge box. For 1, 2, 4 and 8 users started
 * together (the edge alone, small_only, greedy) it measures the aggregate tokens/s, each user's time
 * between tokens (p50, p99) and time to first token, with each decode step run alone and batched
 * (the engine's scheduler, decode-scheduler.ts) on the same loaded model in the same run, and checks that both give every user the
 * same tokens. `--repeat N` runs the whole set N times over (1 user, 4 users, 1 user, 4 users, ...): each
 * repeat's ratios compare rows taken seconds apart, and their median moves less with the machine's load than
 * one pass's rows taken minutes apart.
 *
 * Targets: the Qwen2.5-0.5B shape (a random-weight preset, `--dtype fp32,q4` as `bench decode` builds
 * them) or the demo edge model (`--demo`), or any pack (`--pack`).
 */
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import type { EdgeEngine } from '../../edge/loop/edge-engine.ts';
import { TopProbabilityScorer } from '../../edge/routing/router.ts';
import { DecoderModel } from '../../shared/model/decoder-model.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { createLogger } from '../../shared/process/logger.ts';
import { DEMO } from '../../shared/paths.ts';
import { DecodeScheduler } from '../../shared/model/scheduler/decode-scheduler.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { type ConcurrencyRound, runConcurrentUsers } from './concurrency-run.ts';
import { type BenchDtype, ensureDtypePack, parseDtypes } from './decode-packs.ts';
import { parseLayout } from './decode-profile.ts';
import { type ParallelPeerRound, startLlamaCppParallel } from '../llama-cpp-peer/llama-cpp-parallel.ts';
import { promptIds } from './decode-target.ts';
import { median } from '../../shared/statistics.ts';

export const USAGE = `bench concurrency [--preset qwen2.5-0.5b [--dtype fp32,int8,q4] [--layout plain|fused|fused-matmul] [--peer llama.cpp] | --demo | --pack DIR] [--users 1,2,4,8] [--prompt-tokens 32] [--new-tokens 16] [--max-batch 8] [--gather-ms 4] [--repeat 1] [--threads N] [--json]
      users generating at once on one edge model (small_only, greedy, no cloud): aggregate tokens/s, each
      user's time between tokens p50/p99 and time to first token, every decode step alone vs batched
      (--max-batch) in the same run, and whether both gave every user the same tokens; --demo runs the
      demo edge model; --layout builds the preset as bench decode does; --peer llama.cpp (with a preset) also runs llama.cpp decoding the same number of
      sequences at once on the same weights as GGUF (F32, Q4_0; see bench decode --peer), each user count
      right after ours with both models loaded; --repeat runs the user counts that many times over and
      reports each count's ratio to the first row of the same repeat, median (min-max); --json prints one
      object on the last line`;

export interface ConcurrencyTargetResult {
  target: string;
  pack: string;
  /** Every row, in the order run; `repeat` says which pass over the user counts it belongs to. */
  rounds: (Omit<ConcurrencyRound, 'ids'> & { repeat: number })[];
  /** Per user count and mode: tokens/s over the same repeat's first row (fewest users, alone), median and range over the repeats. */
  byRepeat: RepeatRatio[];
  /**
   * The same ratios of tokens per second inside onnxruntime's `run` (ConcurrencyRound.runMs): the ceiling
   * of `byRepeat` if everything outside the model's passes were free. Where it misses a target too, the
   * passes themselves (the kernels) are what stands in the way.
   */
  byRepeatInsideRun: RepeatRatio[];
  /**
   * Per user count: of the users' tokens, how many batched and alone agree on before a user's first
   * difference (a flipped near-tie changes what follows), over all tokens; 1 when every user got the same.
   */
  sameTokens: Record<number, number>;
}

export interface RepeatRatio {
  users: number;
  batched: boolean;
  median: number;
  min: number;
  max: number;
}

interface Settings {
  users: number[];
  /** Passes over the user counts; 1 when omitted. */
  repeats?: number;
  promptTokens: number;
  newTokens: number;
  maxBatch: number;
  /** The scheduler's wait for the last pass's sequences (SchedulerOptions.gatherMs); its default when omitted. */
  gatherMs?: number;
  threads: number;
  log: (line: string) => void;
  /** Runs right after ours for each user count (the peer's row, under --peer), so both see the same moment. */
  afterUsers?: (users: number, prompts: readonly (readonly number[])[]) => Promise<void>;
}

/** One prompt per user: windows of a real text shifted by one token, so no two users share a prompt. */
async function userPrompts(dir: string, s: Pick<Settings, 'users' | 'promptTokens'>): Promise<number[][]> {
  const most = Math.max(...s.users);
  const ids = await promptIds(loadModelPack(dir), s.promptTokens + most);
  return Array.from({ length: most }, (_, u) => ids.slice(u, u + s.promptTokens));
}

export async function benchConcurrencyOn(target: string, dir: string, s: Settings): Promise<ConcurrencyTargetResult> {
  const pack = loadModelPack(dir);
  const prompts = await userPrompts(dir, s);
  s.log(`loading ${dir} (${s.threads} threads)`);
  const model = await DecoderModel.load(pack, { threads: s.threads });
  const scheduler = DecodeScheduler.over(model, { maxBatch: s.maxBatch, gatherMs: s.gatherMs }, createLogger('bench', 'warn'));
  if (!scheduler) throw new UsageError(`${dir}: its export cannot run a batch (see the warning above)`);
  try {
    const engine: EdgeEngine = { edgeModel: model, router: new TopProbabilityScorer(), tokenizer: await TextTokenizer.fromPack(dir) };
    await runConcurrentUsers(engine, { users: 1, prompts, newTokens: 4 });
    const rounds: (ConcurrencyRound & { repeat: number })[] = [];
    const sameTokens: Record<number, number> = {};
    for (let repeat = 0; repeat < (s.repeats ?? 1); repeat++) {
      for (const users of s.users) {
        const pair: ConcurrencyRound[] = [];
        for (const batched of [false, true]) {
          engine.scheduler = batched ? scheduler : undefined;
          const round = await runConcurrentUsers(engine, { users, prompts, newTokens: s.newTokens });
          s.log(
            `${target}: ${users} users ${batched ? 'batched' : 'alone  '}: ${round.tokensPerSecond.toFixed(1)} tokens/s, gap p50 ${round.gapP50Ms.toFixed(0)} ms`,
          );
          pair.push(round);
        }
        // The worst agreement over the repeats.
        sameTokens[users] = Math.min(sameTokens[users] ?? 1, agreement(pair[0]!.ids, pair[1]!.ids));
        rounds.push(...pair.map((r) => ({ ...r, repeat })));
        await s.afterUsers?.(users, prompts);
      }
    }
    const kept = rounds.map(({ ids: _ids, ...r }) => r);
    const insideRun = kept.map((r) => ({ ...r, tokensPerSecond: (r.tokens / r.runMs) * 1000 }));
    return { target, pack: dir, rounds: kept, byRepeat: repeatRatios(kept), byRepeatInsideRun: repeatRatios(insideRun), sameTokens };
  } finally {
    await model.release();
  }
}

/** Each row's tokens/s over its repeat's first row, gathered per user count and mode: median, least and most. */
export function repeatRatios(rounds: readonly { repeat: number; users: number; batched: boolean; tokensPerSecond: number }[]): RepeatRatio[] {
  const firsts = new Map<number, number>();
  for (const r of rounds) if (!firsts.has(r.repeat)) firsts.set(r.repeat, r.tokensPerSecond);
  const groups = new Map<string, { users: number; batched: boolean; ratios: number[] }>();
  for (const r of rounds) {
    const key = `${r.users} ${r.batched}`;
    const group = groups.get(key) ?? { users: r.users, batched: r.batched, ratios: [] };
    group.ratios.push(r.tokensPerSecond / firsts.get(r.repeat)!);
    groups.set(key, group);
  }
  return [...groups.values()].map(({ users, batched, ratios }) => ({
    users,
    batched,
    median: median(ratios),
    min: Math.min(...ratios),
    max: Math.max(...ratios),
  }));
}

/** The share of `alone`'s tokens that `batched` repeats before each user's first difference. */
function agreement(alone: readonly number[][], batched: readonly number[][]): number {
  let same = 0;
  let all = 0;
  alone.forEach((ids, u) => {
    const first = ids.findIndex((id, i) => batched[u]![i] !== id);
    same += first === -1 ? ids.length : first;
    all += ids.length;
  });
  return all ? same / all : 1;
}

export function formatConcurrency(results: readonly ConcurrencyTargetResult[]): string {
  const lines = [
    '| target | users | steps | tokens/s | × first row | in onnxruntime ms | gap p50 / p99 ms | TTFT p50 / max ms | rows per step | same tokens batched and alone |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    for (const x of r.rounds) {
      // Each repeat's first row runs each step alone with the fewest users (1 by default).
      const one = r.rounds.find((y) => y.repeat === x.repeat)!.tokensPerSecond;
      lines.push(
        `| ${r.target} | ${x.users} | ${x.batched ? 'batched' : 'alone'} | ${x.tokensPerSecond.toFixed(1)} | ${(x.tokensPerSecond / one).toFixed(2)}× | ${x.runMs.toFixed(0)} of ${x.wallMs.toFixed(0)} | ${x.gapP50Ms.toFixed(0)} / ${x.gapP99Ms.toFixed(0)} | ${x.ttftP50Ms.toFixed(0)} / ${x.ttftMaxMs.toFixed(0)} | ${x.meanBatchSize.toFixed(2)} | ${sameText(r.sameTokens[x.users]!)} |`,
      );
    }
  }
  const repeats = Math.max(...results.flatMap((r) => r.rounds.map((x) => x.repeat + 1)));
  if (repeats > 1) {
    lines.push(
      '',
      `| target | users | steps | × first row of the same repeat, median (min–max) of ${repeats} | the same inside onnxruntime's run only (ceiling) |`,
      '|---|---|---|---|---|',
    );
    const range = (x: RepeatRatio) => `${x.median.toFixed(2)}× (${x.min.toFixed(2)}–${x.max.toFixed(2)})`;
    for (const r of results)
      r.byRepeat.forEach((x, i) =>
        lines.push(`| ${r.target} | ${x.users} | ${x.batched ? 'batched' : 'alone'} | ${range(x)} | ${range(r.byRepeatInsideRun[i]!)} |`),
      );
  }
  return lines.join('\n');
}

function sameText(share: number): string {
  return share === 1 ? 'yes' : `${(share * 100).toFixed(0)}% before a difference`;
}

function userCounts(list: string): number[] {
  const counts = list.split(',').map((u) => Number(u.trim()));
  if (counts.some((u) => !Number.isInteger(u) || u < 1 || u > 64)) throw new UsageError(`--users: whole numbers from 1 to 64, got ${JSON.stringify(list)}`);
  return counts;
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    preset: { type: 'string' },
    dtype: { type: 'string' },
    demo: { type: 'boolean' },
    pack: { type: 'string' },
    users: { type: 'string' },
    'prompt-tokens': { type: 'string' },
    'new-tokens': { type: 'string' },
    'max-batch': { type: 'string' },
    'gather-ms': { type: 'string' },
    repeat: { type: 'string' },
    threads: { type: 'string' },
    layout: { type: 'string' },
    peer: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  if ([values.preset !== undefined || values.dtype !== undefined, values.demo, values.pack !== undefined].filter(Boolean).length > 1) {
    throw new UsageError('--preset/--dtype, --demo and --pack are alternatives');
  }
  const usesPreset = !values.demo && values.pack === undefined;
  if (!usesPreset && (values.layout !== undefined || values.peer !== undefined)) throw new UsageError('--layout and --peer work on a --preset');
  if (values.peer !== undefined && values.peer !== 'llama.cpp') throw new UsageError(`--peer: only llama.cpp is known, got ${JSON.stringify(values.peer)}`);
  const layout = values.layout === undefined ? 'plain' : parseLayout(values.layout);
  const log = (line: string) => console.error(line);
  const settings: Settings = {
    users: userCounts(values.users ?? '1,2,4,8'),
    promptTokens: integerFlag(values, 'prompt-tokens', 32, [1, 4096])!,
    newTokens: integerFlag(values, 'new-tokens', 16, [2, 4096])!,
    maxBatch: integerFlag(values, 'max-batch', 8, [2, 64])!,
    gatherMs: integerFlag(values, 'gather-ms', undefined, [0, 1000]),
    repeats: integerFlag(values, 'repeat', 1, [1, 100])!,
    threads: integerFlag(values, 'threads', availableParallelism(), [1, 1024])!,
    log,
  };
  const targets: { target: string; dir: string; dtype?: BenchDtype }[] = [];
  if (values.demo) targets.push({ target: 'demo edge', dir: DEMO.edgePack });
  else if (values.pack) targets.push({ target: basename(values.pack), dir: values.pack });
  else {
    const preset = values.preset ?? 'qwen2.5-0.5b';
    for (const dtype of parseDtypes(values.dtype ?? 'fp32')) {
      const name = layout === 'plain' ? `${preset} ${dtype}` : `${preset} ${layout} ${dtype}`;
      targets.push({ target: name, dir: await ensureDtypePack(preset, dtype, log, layout), dtype });
    }
  }
  const results: ConcurrencyTargetResult[] = [];
  const peer: ParallelPeerRound[] = [];
  for (const t of targets) {
    if (!(values.peer && t.dtype)) {
      results.push(await benchConcurrencyOn(t.target, t.dir, settings));
      continue;
    }
    // Both stay loaded; each user count runs ours (alone, batched), then llama.cpp's, before the next count.
    const llama = await startLlamaCppParallel({ preset: values.preset ?? 'qwen2.5-0.5b', dtype: t.dtype, threads: settings.threads, log });
    try {
      const afterUsers = async (users: number, prompts: readonly (readonly number[])[]) =>
        void peer.push(await llama.runUsers(users, prompts, settings.newTokens));
      results.push(await benchConcurrencyOn(t.target, t.dir, { ...settings, afterUsers }));
    } finally {
      await llama.close();
    }
  }
  console.log(formatConcurrency(results));
  if (peer.length) console.log(formatPeerRounds(peer));
  if (values.json)
    console.log(
      JSON.stringify({
        threads: settings.threads,
        promptTokens: settings.promptTokens,
        newTokens: settings.newTokens,
        maxBatch: settings.maxBatch,
        repeats: settings.repeats,
        results,
        ...(peer.length ? { peer } : {}),
      }),
    );
}

function formatPeerRounds(rounds: readonly ParallelPeerRound[]): string {
  const lines = ['| peer | sequences | tokens/s | gap p50 / p99 ms | TTFT p50 / max ms |', '|---|---|---|---|---|'];
  for (const r of rounds)
    lines.push(
      `| ${r.peer} | ${r.users} | ${r.tokensPerSecond.toFixed(1)} | ${r.gapP50Ms.toFixed(0)} / ${r.gapP99Ms.toFixed(0)} | ${r.ttftP50Ms.toFixed(0)} / ${r.ttftMaxMs.toFixed(0)} |`,
    );
  return lines.join('\n');
}
