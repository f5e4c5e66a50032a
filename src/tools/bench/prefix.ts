/**
 * `bench prefix`: what the prompt cache saves. Through the real decoding loop (prefix-runs.ts), the
 * median time to first token over `repeat` runs of:
 * - a `promptTokens`-token prompt cold (an empty cache);
 * - the same prompt with 95% of it cached (an earlier request sent its first 95%);
 * - a chat's 5th turn (each turn resends the history: earlier prompts, the model's answers, new user
 *   text), without the cache and with the cache the first four turns left.
 * Each ratio is the median over the runs of with / without, the two measured back to back.
 * Then `mixed` requests of random heads and tails through one cache, with the resident set after the
 * first 20 and after all of them (the cache is bounded; RSS must settle), and the cache's bytes.
 *
 * Default target: the demo edge pack (fast; its 512-position window caps the prompt); `--preset
 * qwen2.5-0.5b` the random-weight pack of that shape, built once under models/bench/.
 */
import { availableParallelism } from 'node:os';
import type { EdgeEngine } from '../../edge/decoder-loop.ts';
import { loadEdgeEngine } from '../../edge/load-edge-engine.ts';
import { loadModelPack } from '../../shared/model-pack.ts';
import { DEMO } from '../../shared/paths.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { median } from '../../shared/statistics.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { promptIds, resolvePack } from './decode-target.ts';
import { chatToLastTurn, firstTokenMs, mixedRequests, withFreshCache } from './prefix-runs.ts';

export const USAGE = `bench prefix [--pack DIR | --preset qwen2.5-0.5b] [--prompt-tokens 1000] [--repeat 3] [--cache-mb 256] [--mixed 200] [--threads N] [--json]
      time to first token through the decoding loop: a --prompt-tokens prompt cold and with 95% of it
      in the prompt cache, a chat's 5th turn (60 new tokens a turn, 24-token answers) without and with
      the cache; then --mixed requests through one cache of --cache-mb, with the resident set after the
      first 20, after half and after all; default the demo edge pack (its window caps the prompt at 496 tokens);
      --preset builds a random-weight pack of that shape once under models/bench/`;

const CHAT = { turns: 5, turnTokens: 60, answerTokens: 24 };
/** Positions left for the generated tokens: the prompt is capped at the window minus these. */
const ROOM = 16;

export interface PrefixBenchResult {
  target: string;
  threads: number;
  prompt_tokens: number;
  cold_ttft_ms: number;
  cached95_ttft_ms: number;
  cached95_tokens: number;
  cached95_ratio: number;
  chat_turn: number;
  chat_prompt_tokens: number;
  chat_ttft_ms_without_cache: number;
  chat_ttft_ms_with_cache: number;
  chat_cached_tokens: number;
  chat_ratio: number;
  mixed_requests: number;
  rss_after_20_mb: number;
  rss_at_half_mb: number;
  rss_after_all_mb: number;
  /** The resident set less the prompt cache's bytes at the same moment: what the box holds beyond the cache it was told to keep. */
  rss_less_cache_after_20_mb: number;
  rss_less_cache_after_all_mb: number;
  cache_bytes: number;
  cache_limit_bytes: number;
}

interface PrefixBenchOptions {
  target: string;
  dir: string;
  promptTokens: number;
  repeat: number;
  cacheBytes: number;
  mixed: number;
  threads: number;
  log: (line: string) => void;
}

export async function benchPrefix(o: PrefixBenchOptions): Promise<PrefixBenchResult> {
  const pack = loadModelPack(o.dir);
  const promptTokens = Math.min(o.promptTokens, pack.maxPositions - ROOM);
  if (promptTokens < o.promptTokens) o.log(`the pack's window is ${pack.maxPositions} positions: a ${promptTokens}-token prompt`);
  const ids = await promptIds(pack, promptTokens);
  const userIds = await promptIds(pack, CHAT.turns * CHAT.turnTokens);
  const parts = await loadEdgeEngine({ edgeModel: o.dir, threads: o.threads });
  try {
    const engine: EdgeEngine = parts;
    await firstTokenMs(engine, ids); // onnxruntime's first runs allocate: untimed
    const cold: number[] = [];
    const cached95: { ttftMs: number; cachedTokens: number }[] = [];
    const head = ids.slice(0, Math.floor(promptTokens * 0.95));
    for (let i = 0; i < o.repeat; i++) {
      cold.push((await firstTokenMs(withFreshCache(engine, o.cacheBytes), ids)).ttftMs);
      const warm = withFreshCache(engine, o.cacheBytes);
      await firstTokenMs(warm, head);
      cached95.push(await firstTokenMs(warm, ids));
      o.log(`run ${i + 1}/${o.repeat}: cold ${cold.at(-1)!.toFixed(1)} ms, 95% cached ${cached95.at(-1)!.ttftMs.toFixed(1)} ms`);
    }
    const chatWithout: number[] = [];
    const chatWith: { ttftMs: number; cachedTokens: number }[] = [];
    let chatPrompt: number[] = [];
    for (let i = 0; i < o.repeat; i++) {
      const chat = withFreshCache(engine, o.cacheBytes);
      chatPrompt = await chatToLastTurn(chat, userIds, CHAT);
      chatWith.push(await firstTokenMs(chat, chatPrompt));
      chatWithout.push((await firstTokenMs(engine, chatPrompt)).ttftMs);
      o.log(`chat turn ${CHAT.turns} (${chatPrompt.length} tokens): ${chatWithout.at(-1)!.toFixed(1)} ms without the cache, ${chatWith.at(-1)!.ttftMs.toFixed(1)} ms with it`);
    }
    const mixedEngine = withFreshCache(engine, o.cacheBytes);
    const rss = await mixedRequests(mixedEngine, ids, o.mixed, seededRandom(7));
    const coldMs = median(cold);
    const cachedMs = median(cached95.map((r) => r.ttftMs));
    const chatWithoutMs = median(chatWithout);
    const chatWithMs = median(chatWith.map((r) => r.ttftMs));
    return {
      target: o.target,
      threads: o.threads,
      prompt_tokens: promptTokens,
      cold_ttft_ms: coldMs,
      cached95_ttft_ms: cachedMs,
      cached95_tokens: cached95[0]!.cachedTokens,
      // Each pair is measured back to back, under the same load: the median of their ratios.
      cached95_ratio: median(cold.map((ms, i) => cached95[i]!.ttftMs / ms)),
      chat_turn: CHAT.turns,
      chat_prompt_tokens: chatPrompt.length,
      chat_ttft_ms_without_cache: chatWithoutMs,
      chat_ttft_ms_with_cache: chatWithMs,
      chat_cached_tokens: chatWith[0]!.cachedTokens,
      chat_ratio: median(chatWithout.map((ms, i) => chatWith[i]!.ttftMs / ms)),
      mixed_requests: o.mixed,
      rss_after_20_mb: rss.after20.rssMb,
      rss_at_half_mb: rss.atHalf.rssMb,
      rss_after_all_mb: rss.afterAll.rssMb,
      rss_less_cache_after_20_mb: rss.after20.rssMb - rss.after20.cacheMb,
      rss_less_cache_after_all_mb: rss.afterAll.rssMb - rss.afterAll.cacheMb,
      cache_bytes: mixedEngine.promptCache!.stats.bytes,
      cache_limit_bytes: o.cacheBytes,
    };
  } finally {
    await parts.release();
  }
}

export function formatPrefixBench(r: PrefixBenchResult): string {
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return [
    `${r.target}, ${r.threads} threads`,
    `${r.prompt_tokens}-token prompt, time to first token (medians): cold ${ms(r.cold_ttft_ms)}; ${r.cached95_tokens} tokens cached ${ms(r.cached95_ttft_ms)} (${pct(r.cached95_ratio)} of cold, median of the runs' ratios)`,
    `chat turn ${r.chat_turn} (${r.chat_prompt_tokens} tokens): ${ms(r.chat_ttft_ms_without_cache)} without the cache; ${ms(r.chat_ttft_ms_with_cache)} with ${r.chat_cached_tokens} tokens cached (${pct(r.chat_ratio)})`,
    `${r.mixed_requests} mixed requests: RSS ${r.rss_after_20_mb.toFixed(0)} MiB after 20, ${r.rss_at_half_mb.toFixed(0)} after half, ${r.rss_after_all_mb.toFixed(0)} after all (${pct(r.rss_after_all_mb / r.rss_after_20_mb - 1)} since 20, ${pct(r.rss_after_all_mb / r.rss_at_half_mb - 1)} since half); cache ${(r.cache_bytes / 2 ** 20).toFixed(1)} of ${(r.cache_limit_bytes / 2 ** 20).toFixed(0)} MiB`,
    `  less the cache: ${r.rss_less_cache_after_20_mb.toFixed(0)} MiB after 20, ${r.rss_less_cache_after_all_mb.toFixed(0)} after all (${pct(r.rss_less_cache_after_all_mb / r.rss_less_cache_after_20_mb - 1)})`,
  ].join('\n');
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    pack: { type: 'string' },
    preset: { type: 'string' },
    'prompt-tokens': { type: 'string' },
    repeat: { type: 'string' },
    'cache-mb': { type: 'string' },
    mixed: { type: 'string' },
    threads: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const log = (line: string) => console.error(line);
  const { target, dir } = values.preset || values.pack ? await resolvePack({ preset: values.preset, pack: values.pack, log }) : { target: 'demo edge pack', dir: DEMO.edgePack };
  const r = await benchPrefix({
    target: `${target} (${dir})`,
    dir,
    promptTokens: integerFlag(values, 'prompt-tokens', 1000, [40, 1_000_000])!,
    repeat: integerFlag(values, 'repeat', 3, [1, 100])!,
    cacheBytes: integerFlag(values, 'cache-mb', 256, [1, 1_000_000])! * 2 ** 20,
    mixed: integerFlag(values, 'mixed', 200, [0, 100_000])!,
    threads: integerFlag(values, 'threads', availableParallelism(), [1, 1024])!,
    log,
  });
  console.log(formatPrefixBench(r));
  if (values.json) console.log(JSON.stringify(r));
}
