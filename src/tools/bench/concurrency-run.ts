/**
 * One round of `bench concurrency`: `users` generations started together on one edge model through the
 * decoding loop (small_only, greedy, no cloud), each with its own prompt, timed per token.
 *
 * @example
 * const round = await runConcurrentUsers(engine, { users: 4, prompts, newTokens: 16 });
 * round.tokensPerSecond; // all users' tokens over the wall time of the round
 */
import { generate, type EdgeEngine } from '../../edge/loop/decoder-loop.ts';
import { parseGenerationRequest } from '../../edge/request/generation-request.ts';
import { percentile } from '../../shared/statistics.ts';

export interface ConcurrencyRoundOptions {
  users: number;
  /** One prompt (token ids) per user at least. */
  prompts: readonly (readonly number[])[];
  newTokens: number;
}

export interface ConcurrencyRound {
  users: number;
  batched: boolean;
  tokens: number;
  wallMs: number;
  /** All users' tokens over the wall time. */
  tokensPerSecond: number;
  /**
   * Time inside the model's onnxruntime runs during the round (prefills and decode passes; DecoderStats.runMs).
   * tokens / runMs is what the round would reach if nothing outside those runs (router, sampling, the loop)
   * cost anything.
   */
  runMs: number;
  /** Gaps between a user's consecutive tokens, over all users. */
  gapP50Ms: number;
  gapP99Ms: number;
  /** Request start → first token, median and worst over the users. */
  ttftP50Ms: number;
  ttftMaxMs: number;
  /** Mean rows of the decode steps (the `done` metric), averaged over the users. */
  meanBatchSize: number;
  /** Each user's token ids, to check batched against alone. */
  ids: number[][];
}

export async function runConcurrentUsers(engine: EdgeEngine, o: ConcurrencyRoundOptions): Promise<ConcurrencyRound> {
  const runMsBefore = engine.edgeModel.stats.runMs;
  const start = performance.now();
  const users = Array.from({ length: o.users }, async (_, u) => {
    const request = {
      ...parseGenerationRequest({ prompt: `user ${u}`, mode: 'small_only', maxNewTokens: o.newTokens, temperature: 0 }),
      promptIds: o.prompts[u]!,
    };
    const stamps: number[] = [];
    const ids: number[] = [];
    let meanBatchSize = 0;
    for await (const event of generate(engine, request)) {
      if (event.type === 'token') {
        stamps.push(performance.now());
        ids.push(event.id);
      } else meanBatchSize = event.metrics.meanBatchSize;
    }
    return { stamps, ids, meanBatchSize };
  });
  const done = await Promise.all(users);
  const wallMs = performance.now() - start;
  const gaps = done.flatMap((u) => u.stamps.slice(1).map((t, i) => t - u.stamps[i]!));
  const ttfts = done.map((u) => (u.stamps[0] ?? performance.now()) - start);
  const tokens = done.reduce((n, u) => n + u.ids.length, 0);
  return {
    users: o.users,
    batched: engine.scheduler !== undefined,
    tokens,
    wallMs,
    tokensPerSecond: (tokens / wallMs) * 1000,
    runMs: engine.edgeModel.stats.runMs - runMsBefore,
    gapP50Ms: percentile(gaps, 50),
    gapP99Ms: percentile(gaps, 99),
    ttftP50Ms: percentile(ttfts, 50),
    ttftMaxMs: Math.max(...ttfts),
    meanBatchSize: done.reduce((s, u) => s + u.meanBatchSize, 0) / done.length,
    ids: done.map((u) => u.ids),
  };
}
