/** `bun run bench prefix`: a short run on the demo edge pack, the counts it must get exactly, and its usage errors. */
import { beforeAll, expect, test } from 'bun:test';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

function bench(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'prefix', ...args], { stdout: 'pipe', stderr: 'pipe', timeout: 90_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

test('a short run: the cached token counts exact, the cache within its bound, one JSON object last', () => {
  const r = bench('--prompt-tokens', '200', '--repeat', '1', '--mixed', '25', '--cache-mb', '1', '--json');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.slice(0, -1).join('\n')).toMatch(/200-token prompt, time to first token \(medians\): cold [\d.]+ ms; 190 tokens cached [\d.]+ ms/);
  const result = JSON.parse(lines.at(-1)!);
  expect(result).toMatchObject({ prompt_tokens: 200, cached95_tokens: 190, chat_turn: 5, mixed_requests: 25, cache_limit_bytes: 2 ** 20 });
  // Five turns of 60 user tokens and four answers of 24: the 5th turn restores all but its own new 60 and the
  // 4th answer's last token (never fed: the generation ended on it).
  expect(result.chat_prompt_tokens).toBe(5 * 60 + 4 * 24);
  expect(result.chat_cached_tokens).toBe(result.chat_prompt_tokens - 61);
  expect(result.cache_bytes).toBeGreaterThan(0);
  expect(result.cache_bytes).toBeLessThanOrEqual(2 ** 20);
  // "Less the cache" takes the cache's bytes at the same moment as the resident set: after all, the final figure.
  expect(result.rss_less_cache_after_all_mb).toBeCloseTo(result.rss_after_all_mb - result.cache_bytes / 2 ** 20, 6);
  // The time inside onnxruntime's runs is part of the time to first token, and one run of three is its ratio.
  for (const [run, ttft] of [
    ['cold_run_ms', 'cold_ttft_ms'],
    ['cached95_run_ms', 'cached95_ttft_ms'],
    ['chat_run_ms_without_cache', 'chat_ttft_ms_without_cache'],
    ['chat_run_ms_with_cache', 'chat_ttft_ms_with_cache'],
  ]) {
    expect(result[run]).toBeGreaterThan(0);
    expect(result[run]).toBeLessThanOrEqual(result[ttft]);
  }
  expect(result.cached95_ratio_inside_run).toBeCloseTo(result.cached95_run_ms / result.cold_run_ms, 12);
  expect(result.chat_ratio_inside_run).toBeCloseTo(result.chat_run_ms_with_cache / result.chat_run_ms_without_cache, 12);
  // A one-token prompt's pass costs less than a 200-token one's.
  expect(result.one_token_run_ms).toBeGreaterThan(0);
  expect(result.one_token_run_ms).toBeLessThan(result.cold_run_ms);
  expect(lines.slice(0, -1).join('\n')).toMatch(
    /inside onnxruntime's runs alone \(the ceiling\): cold [\d.]+ ms, cached [\d.]+ ms \([\d.]+%\); chat turn [\d.]+ ms and [\d.]+ ms \([\d.]+%\); a one-token prompt [\d.]+ ms/,
  );
  for (const key of [
    'cold_ttft_ms',
    'cached95_ttft_ms',
    'chat_ttft_ms_without_cache',
    'chat_ttft_ms_with_cache',
    'rss_after_20_mb',
    'rss_at_half_mb',
    'rss_after_all_mb',
    'rss_less_cache_after_20_mb',
    'rss_less_cache_after_all_mb',
  ]) {
    expect(result[key]).toBeGreaterThan(0);
  }
});

test('usage errors exit 2 with the message; help lists the target', () => {
  const small = bench('--prompt-tokens', '10');
  expect(small.code).toBe(2);
  expect(small.stderr).toStartWith('error: --prompt-tokens must be in [40, 1000000], got 10');
  const both = bench('--pack', 'x', '--preset', 'qwen2.5-0.5b');
  expect(both.code).toBe(2);
  expect(both.stderr).toStartWith('error: --preset and --pack are alternatives');
  const help = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'help'], { stdout: 'pipe' });
  expect(help.stdout.toString()).toContain('bench prefix');
});
