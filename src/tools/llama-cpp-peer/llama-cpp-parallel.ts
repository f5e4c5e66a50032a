/**
 * `bench concurrency --peer llama.cpp`: llama.cpp decoding the same number of sequences at once (one
 * node-llama-cpp context with a sequence per user, their tokens batched together), on the preset's weights
 * as GGUF at the same bit width, with our prompts, new tokens and threads; the figures `bench concurrency`
 * reports for our rounds.
 *
 * @example
 * const rounds = await runLlamaCppParallel({ preset: 'qwen2.5-0.5b', dtype: 'q4', users: [1, 4], prompts, newTokens: 16, threads: 2, log });
 */
import { join } from 'node:path';
import { percentile } from '../../shared/statistics.ts';
import type { BenchDtype } from '../bench/decode-packs.ts';
import { ensureNodeLlamaCpp, ensurePeerGgufs, PEER_TYPES, runNodeScript } from './llama-cpp-peer.ts';

export interface ParallelPeerOptions {
  preset: string;
  dtype: BenchDtype;
  users: readonly number[];
  /** One prompt (token ids) per user at least. */
  prompts: readonly (readonly number[])[];
  newTokens: number;
  threads: number;
  log: (line: string) => void;
}

export interface ParallelPeerRound {
  peer: string;
  users: number;
  tokens: number;
  tokensPerSecond: number;
  gapP50Ms: number;
  gapP99Ms: number;
  ttftP50Ms: number;
  ttftMaxMs: number;
}

interface RunnerOutput {
  users: { stamps: number[]; tokens: number[] }[];
  wallMs: number;
}

export async function runLlamaCppParallel(o: ParallelPeerOptions): Promise<ParallelPeerRound[]> {
  const dir = await ensureNodeLlamaCpp(o.log);
  const gguf = ensurePeerGgufs(o.preset, [o.dtype], o.log).get(o.dtype)!;
  const peer = `llama.cpp ${PEER_TYPES[o.dtype]}`;
  const rounds: ParallelPeerRound[] = [];
  for (const users of o.users) {
    o.log(`${peer}: ${users} sequences at once`);
    const request = { modelPath: gguf, threads: o.threads, prompts: o.prompts.slice(0, users), newTokens: o.newTokens };
    const out = JSON.parse(await runNodeScript(join(import.meta.dir, 'llama-cpp-parallel-runner.mjs'), request, dir, o.log)) as RunnerOutput;
    const gaps = out.users.flatMap((u) => u.stamps.slice(1).map((t, i) => t - u.stamps[i]!));
    const ttfts = out.users.map((u) => u.stamps[0] ?? out.wallMs);
    const tokens = out.users.reduce((n, u) => n + u.tokens.length, 0);
    rounds.push({
      peer,
      users,
      tokens,
      tokensPerSecond: (tokens / out.wallMs) * 1000,
      gapP50Ms: percentile(gaps, 50),
      gapP99Ms: percentile(gaps, 99),
      ttftP50Ms: percentile(ttfts, 50),
      ttftMaxMs: Math.max(...ttfts),
    });
  }
  return rounds;
}
