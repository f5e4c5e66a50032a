/**
 * `bench concurrency --peer llama.cpp`: llama.cpp decoding the same number of sequences at once (one
 * node-llama-cpp context with a sequence per user, their tokens batched together), on the preset's weights
 * as GGUF at the same bit width, with our prompts, new tokens and threads; the figures `bench concurrency`
 * reports for our rounds. The model stays loaded in a node process (llama-cpp-parallel-runner.mjs, over
 * line-process.ts's protocol) so that each user count can run right after ours.
 *
 * @example
 * const peer = await startLlamaCppParallel({ preset: 'qwen2.5-0.5b', dtype: 'q4', threads: 2, log });
 * const round = await peer.runUsers(4, prompts, 16);
 * await peer.close();
 */
import { percentile } from '../../shared/statistics.ts';
import type { BenchDtype } from '../bench/decode-packs.ts';
import { LineProcess } from '../bench/line-process.ts';
import { join } from 'node:path';
import { ensureNodeLlamaCpp, ensurePeerGgufs, PEER_TYPES } from './llama-cpp-peer.ts';

export interface ParallelPeerOptions {
  preset: string;
  dtype: BenchDtype;
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

export interface ParallelPeer {
  /** `users` sequences at once, user u on `prompts[u]`, each decoding `newTokens` tokens. */
  runUsers(users: number, prompts: readonly (readonly number[])[], newTokens: number): Promise<ParallelPeerRound>;
  close(): Promise<void>;
}

export async function startLlamaCppParallel(o: ParallelPeerOptions): Promise<ParallelPeer> {
  const dir = await ensureNodeLlamaCpp(o.log);
  const gguf = ensurePeerGgufs(o.preset, [o.dtype], o.log).get(o.dtype)!;
  const peer = `llama.cpp ${PEER_TYPES[o.dtype]}`;
  o.log(`${peer}: loading ${gguf} under node`);
  const { helper } = await LineProcess.start({
    command: ['node', join(import.meta.dir, 'llama-cpp-parallel-runner.mjs'), JSON.stringify({ modelPath: gguf, threads: o.threads })],
    name: peer,
    env: { ...process.env, NODE_LLAMA_CPP_DIR: dir },
    log: o.log,
  });
  return {
    async runUsers(users, prompts, newTokens) {
      o.log(`${peer}: ${users} sequences at once`);
      const out = await helper.request<RunnerOutput>({ type: 'users', prompts: prompts.slice(0, users), newTokens });
      return parallelRound(peer, users, out);
    },
    close: () => helper.close(),
  };
}

function parallelRound(peer: string, users: number, out: RunnerOutput): ParallelPeerRound {
  const gaps = out.users.flatMap((u) => u.stamps.slice(1).map((t, i) => t - u.stamps[i]!));
  const ttfts = out.users.map((u) => u.stamps[0] ?? out.wallMs);
  const tokens = out.users.reduce((n, u) => n + u.tokens.length, 0);
  return {
    peer,
    users,
    tokens,
    tokensPerSecond: (tokens / out.wallMs) * 1000,
    gapP50Ms: percentile(gaps, 50),
    gapP99Ms: percentile(gaps, 99),
    ttftP50Ms: percentile(ttfts, 50),
    ttftMaxMs: Math.max(...ttfts),
  };
}
