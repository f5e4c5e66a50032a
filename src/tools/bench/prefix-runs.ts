/**
 * The measurements of `bench prefix`, each through the real decoding loop (the edge model alone, greedy,
 * the built-in router) so that the time to first token is the loop's own `ttftMs`: the prefill, the
 * prompt cache's lookup and restore, and the copy of the prompt's cache into it included.
 *
 * @example
 * const first = await firstTokenMs(engine, ids); // { ttftMs, cachedTokens, runMs }
 */
import { generate, type EdgeEngine } from '../../edge/loop/decoder-loop.ts';
import type { GenerationMetrics } from '../../edge/loop/generation-metrics.ts';
import { parseGenerationRequest } from '../../edge/request/generation-request.ts';
import { AppError } from '../../shared/errors.ts';
import { PrefixCache } from '../../shared/model/prefix-cache.ts';

/** One generation from `ids`: its final metrics and the ids it generated. */
export async function runIds(engine: EdgeEngine, ids: readonly number[], maxNewTokens: number): Promise<{ metrics: GenerationMetrics; output: number[] }> {
  const request = {
    ...parseGenerationRequest(
      { prompt: '(token ids)', mode: 'small_only', maxNewTokens, temperature: 0 },
      { maxPromptChars: 64, maxNewTokens, maxRouteSpan: 1 },
    ),
    promptIds: ids,
  };
  const output: number[] = [];
  for await (const event of generate(engine, request)) {
    if (event.type === 'token') output.push(event.id);
    else return { metrics: event.metrics, output };
  }
  throw new AppError('INTERNAL', 'the loop ended without a done event');
}

/** What one first token cost: its time, the prompt tokens the cache restored, and the time inside onnxruntime's runs. */
export interface FirstToken {
  ttftMs: number;
  cachedTokens: number;
  /** The time inside the edge model's onnxruntime runs for it (DecoderStats.runMs): the time to first token less the loop's, the cache's and the router's own work. */
  runMs: number;
}

/** Time to first token of `ids` (one token generated). */
export async function firstTokenMs(engine: EdgeEngine, ids: readonly number[]): Promise<FirstToken> {
  const runMsBefore = engine.edgeModel.stats.runMs;
  const { metrics } = await runIds(engine, ids, 1);
  return { ttftMs: metrics.ttftMs, cachedTokens: metrics.cachedTokens, runMs: engine.edgeModel.stats.runMs - runMsBefore };
}

/** An engine over the same parts with an empty prompt cache of `maxBytes`. */
export function withFreshCache(engine: EdgeEngine, maxBytes: number): EdgeEngine {
  return { ...engine, promptCache: new PrefixCache(engine.edgeModel, { maxBytes }) };
}

/**
 * A chat of `turns` turns as token ids: each turn's prompt is the previous prompt, the answer the model
 * gave it (`answerTokens`, greedy) and the next `turnTokens` ids of the user's text. Run through
 * `engine`, whose cache then holds the earlier turns. Returns the last turn's prompt.
 */
export async function chatToLastTurn(
  engine: EdgeEngine,
  userIds: readonly number[],
  o: { turns: number; turnTokens: number; answerTokens: number },
): Promise<number[]> {
  let prompt: number[] = [];
  for (let turn = 0; turn < o.turns; turn++) {
    prompt = [...prompt, ...userIds.slice(turn * o.turnTokens, (turn + 1) * o.turnTokens)];
    if (turn === o.turns - 1) break;
    const { output } = await runIds(engine, prompt, o.answerTokens);
    prompt = [...prompt, ...output];
  }
  return prompt;
}

/** The resident set now, in MiB, after a full garbage collection (so that what is unreachable does not count). */
export function rssMb(): number {
  Bun.gc(true);
  return process.memoryUsage.rss() / 2 ** 20;
}

/** The resident set and the prompt cache's bytes at one point of `mixedRequests`, in MiB. */
export interface MemoryPoint {
  rssMb: number;
  cacheMb: number;
}

/**
 * `count` requests through `engine`'s cache, mixed as a shared box sees them: a random head of `ids`
 * (a repeated system prompt, a resent context, or little of it) with a random tail after it, a few tokens
 * generated each. Returns the resident set after the first 20, after half and after all, each with the
 * prompt cache's bytes then: the cache fills towards its bound by design, so whether the box leaks is
 * whether the rest settles (onnxruntime's and the allocator's pools also grow with the first shapes seen).
 */
export async function mixedRequests(
  engine: EdgeEngine,
  ids: readonly number[],
  count: number,
  random: () => number,
): Promise<{ after20: MemoryPoint; atHalf: MemoryPoint; afterAll: MemoryPoint }> {
  const point = (): MemoryPoint => ({ rssMb: rssMb(), cacheMb: (engine.promptCache?.stats.bytes ?? 0) / 2 ** 20 });
  let after20 = point();
  let atHalf = after20;
  for (let i = 0; i < count; i++) {
    const head = ids.slice(0, Math.floor(random() * ids.length));
    const tail = Array.from({ length: 1 + Math.floor(random() * 48) }, () => ids[Math.floor(random() * ids.length)]!);
    await runIds(engine, [...head, ...tail].slice(0, ids.length), 4);
    if (i === 19) after20 = point();
    if (i === Math.floor(count / 2) - 1) atHalf = point();
  }
  return { after20, atHalf, afterAll: point() };
}
