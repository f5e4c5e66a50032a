/**
 * `bench prefix`: what the prompt cache saves. Through the real decoding loop (prefix-runs.ts), the
 * median time to first token over `repeat` runs of:
 * - a `promptTokens`-token prompt cold (an empty cache);
 * - the same prompt with 95% of it cached (an earlier request sent its first 95%);
 * - a chat's 5th turn (each turn resends the history: earlier prompts, the model's answers, new user
 *   text), without the cache and with the cache the first four turns left.
 * Each ratio is the median over the runs of with / without, the two measured back to back; each again on
 * the time inside the edge model's onnxruntime runs alone (`*_inside_run`): the ratio if the loop, the
 * cache's lookup and copies and the router cost nothing, so what no change outside onnxruntime can beat.
 * With them, the run of a one-token prompt: what every pass costs whatever its length (the weights read
 * once, the head's one row), the part of a short prefill that a cache cannot take away.
 * Then `mixed` requests of random heads and tails through one cache, with the resident set after the
 * first 20 and after all of them (the cache is bounded; RSS must settle), and the cache's bytes.
 *
 * Default target: the demo edge pack (fast; its 512-position window caps the prompt); `--preset
 * qwen2.5-0.5b` the random-weight pack of that shape, built once under models/bench/.
 */
import { availableParallelism } from 'node:os';
import type { EdgeEngine } from '../../edge/loop/decoder-loop.ts';
import { loadEdgeEngine } from '../../edge/server/load-edge-engine.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { DEMO } from '../../shared/paths.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { median } from '../../shared/statistics.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { promptIds, resolvePack } from './decode-target.ts';
import { chatToLastTurn, firstTokenMs, mixedRequests, withFreshCache, type FirstToken } from './prefix-runs.ts';

export const USAGE = `bench prefix [--pack DIR | --preset qwen2.5-0.5b] [--prompt-tokens 1000] [--repeat 3] [--cache-mb 256] [--mixed 200] [--threads N] [--json]
      time to first token through the decoding loop: a --prompt-tokens prompt cold and with 95% of it
      in the prompt cache, a chat's 5th turn (60 new tokens a turn, 24-token answers) without and with
      the cache, each also on the time inside onnxruntime's runs alone; then --mixed requests through
      one cache of --cache-mb, with the resident set after the first 20, after half and after all;
      default the demo edge pack (its window caps the prompt at 496 tokens);
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
  /** Medians of the time inside onnxruntime's runs for the same first tokens, and the ratio on that time alone. */
  cold_run_ms: number;
  cached95_run_ms: number;
  cached95_ratio_inside_run: number;
  /** The run of a one-token prompt: the cost of a pass whatever its length. */
  one_token_run_ms: number;
  chat_turn: number;
  chat_prompt_tokens: number;
  chat_ttft_ms_without_cache: number;
  chat_ttft_ms_with_cache: number;
  chat_cached_tokens: number;
  chat_ratio: number;
  chat_run_ms_without_cache: number;
  chat_run_ms_with_cache: number;
  chat_ratio_inside_run: number;
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
    const cold: FirstToken[] = [];
    const cached95: FirstToken[] = [];
    const oneToken: FirstToken[] = [];
    const head = ids.slice(0, Math.floor(promptTokens * 0.95));
    for (let i = 0; i < o.repeat; i++) {
      cold.push(await firstTokenMs(withFreshCache(engine, o.cacheBytes), ids));
      const warm = withFreshCache(engine, o.cacheBytes);
      await firstTokenMs(warm, head);
      cached95.push(await firstTokenMs(warm, ids));
      oneToken.push(await firstTokenMs(withFreshCache(engine, o.cacheBytes), ids.slice(0, 1)));
      o.log(`run ${i + 1}/${o.repeat}: cold ${cold.at(-1)!.ttftMs.toFixed(1)} ms, 95% cached ${cached95.at(-1)!.ttftMs.toFixed(1)} ms`);
    }
    const chatWithout: FirstToken[] = [];
    const chatWith: FirstToken[] = [];
    let chatPrompt: number[] = [];
    for (let i = 0; i < o.repeat; i++) {
      const chat = withFreshCache(engine, o.cacheBytes);
      chatPrompt = await chatToLastTurn(chat, userIds, CHAT);
      chatWith.push(await firstTokenMs(chat, chatPrompt));
      chatWithout.push(await firstTokenMs(engine, chatPrompt));
      o.log(
        `chat turn ${CHAT.turns} (${chatPrompt.length} tokens): ${chatWithout.at(-1)!.ttftMs.toFixed(1)} ms without the cache, ${chatWith.at(-1)!.ttftMs.toFixed(1)} ms with it`,
      );
    }
    const mixedEngine = withFreshCache(engine, o.cacheBytes);
    const rss = await mixedRequests(mixedEngine, ids, o.mixed, seededRandom(7));
    const ttft = (runs: FirstToken[]) => median(runs.map((r) => r.ttftMs));
    const run = (runs: FirstToken[]) => median(runs.map((r) => r.runMs));
    // Each pair is measured back to back, under the same load: the median of their ratios.
    const ratio = (withCache: FirstToken[], without: FirstToken[], of: (r: FirstToken) => number) => median(without.map((r, i) => of(withCache[i]!) / of(r)));
    return {
      target: o.target,
      threads: o.threads,
      prompt_tokens: promptTokens,
      cold_ttft_ms: ttft(cold),
      cached95_ttft_ms: ttft(cached95),
      cached95_tokens: cached95[0]!.cachedTokens,
      cached95_ratio: ratio(cached95, cold, (r) => r.ttftMs),
      cold_run_ms: run(cold),
      cached95_run_ms: run(cached95),
      cached95_ratio_inside_run: ratio(cached95, cold, (r) => r.runMs),
      one_token_run_ms: run(oneToken),
      chat_turn: CHAT.turns,
      chat_prompt_tokens: chatPrompt.length,
      chat_ttft_ms_without_cache: ttft(chatWithout),
      chat_ttft_ms_with_cache: ttft(chatWith),
      chat_cached_tokens: chatWith[0]!.cachedTokens,
      chat_ratio: ratio(chatWith, chatWithout, (r) => r.ttftMs),
      chat_run_ms_without_cache: run(chatWithout),
      chat_run_ms_with_cache: run(chatWith),
      chat_ratio_inside_run: ratio(chatWith, chatWithout, (r) => r.runMs),
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
    `inside onnxruntime's runs alone (the ceiling): cold ${ms(r.cold_run_ms)}, cached ${ms(r.cached95_run_ms)} (${pct(r.cached95_ratio_inside_run)}); chat turn ${ms(r.chat_run_ms_without_cache)} and ${ms(r.chat_run_ms_with_cache)} (${pct(r.chat_ratio_inside_run)}); a one-token prompt ${ms(r.one_token_run_ms)} (what any pass costs)`,
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
  const { target, dir } =
    values.preset || values.pack ? await resolvePack({ preset: values.preset, pack: values.pack, log }) : { target: 'demo edge pack', dir: DEMO.edgePack };
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
