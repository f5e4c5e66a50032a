/** `bun run bench load`: a short run with few streams, its shim's prefix-cache figure, and its usage errors. */
import { beforeAll, expect, test } from 'bun:test';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { shimStats } from '../src/tools/bench/load-shim.ts';
import { startLoopLagProbe } from '../src/tools/bench/loop-lag.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

const MB = 1024 * 1024;

function bench(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'load', ...args], { stdout: 'pipe', stderr: 'pipe', timeout: 60_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

test('a short load run: no errors, every routed step and generation counted, the shim holds nothing at the end', () => {
  const r = bench('--duration', '2', '--streams', '8', '--generations', '2', '--json');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.slice(0, -1).join('\n')).toMatch(/routed step round trip p50 \/ p99\s+\d+\.\d{3} \/ \d+\.\d{3} ms/);
  const result = JSON.parse(lines.at(-1)!);
  for (const key of ['completed', 'errors', 'p50_ms', 'p99_ms', 'rss_start_mb', 'rss_end_mb']) expect(typeof result[key]).toBe('number');
  expect(result.errors).toBe(0);
  expect(result.error_messages).toEqual([]);
  expect(result.streams).toBe(8);
  expect(result.generations_concurrent).toBe(2);
  expect(result.duration_s).toBe(2);
  expect(result.routed_steps).toBeGreaterThan(0);
  expect(result.generations).toBeGreaterThan(0);
  expect(result.completed).toBe(result.routed_steps + result.generations);
  // Sessions are never cut short: one that starts before the deadline takes all of its 32 steps.
  expect(result.routed_steps).toBe(result.sessions * 32);
  expect(result.generation_routed_tokens).toBeGreaterThan(0);
  expect(result.p50_ms).toBeGreaterThan(0);
  expect(result.p50_ms).toBeLessThanOrEqual(result.p99_ms);
  expect(result.generation_step_p50_ms).toBeLessThanOrEqual(result.generation_step_p99_ms);
  expect(result.rss_process).toBe('shim');
  expect(result.rss_start_mb).toBeGreaterThan(0);
  expect(result.rss_end_mb).toBeGreaterThan(0);
  // The prefix cache (512 MB by default) keeps closed sessions' KV caches: part of the end's RSS, reported apart.
  for (const key of [
    'prefix_cache_mb_start',
    'prefix_cache_mb_end',
    'prefix_cache_bytes_start',
    'prefix_cache_bytes_end',
    'rss_end_net_of_cache_mb',
    'rss_net_growth',
  ]) {
    expect(typeof result[key]).toBe('number');
  }
  expect(result.prefix_cache_bytes_start).toBeGreaterThanOrEqual(0);
  expect(result.prefix_cache_bytes_end).toBeGreaterThan(0);
  expect(result.prefix_cache_bytes_end).toBeLessThanOrEqual(512 * MB);
  expect(Number.isInteger(result.prefix_cache_bytes_end)).toBe(true);
  expect(result.prefix_cache_mb_start).toBe(Math.round((result.prefix_cache_bytes_start / MB) * 10) / 10);
  expect(result.prefix_cache_mb_end).toBe(Math.round((result.prefix_cache_bytes_end / MB) * 10) / 10);
  expect(result.rss_end_net_of_cache_mb).toBeCloseTo(result.rss_end_mb - result.prefix_cache_mb_end, 6);
  expect(result.rss_net_growth).toBeCloseTo(result.rss_end_net_of_cache_mb / result.rss_start_mb, 2);
  const text = lines.slice(0, -1).join('\n');
  expect(text).toMatch(new RegExp(`of it the prefix cache +${result.prefix_cache_mb_start.toFixed(1)} → ${result.prefix_cache_mb_end.toFixed(1)} MB`));
  expect(text).toMatch(
    new RegExp(`net of the prefix cache +${result.rss_end_net_of_cache_mb.toFixed(1)} MB, ${result.rss_net_growth.toFixed(2)}× the start \\(target ≤ 1\\.5\\)`),
  );
  expect(result.shim_sessions_end).toBe(0);
  expect(result.shim_context_tokens_end).toBe(0);
  expect(result.shim_streams_end).toBe(0);
  // The cap is the number of streams, and so is the number of live KV caches: nothing is evicted.
  expect(result.shim_evictions).toBe(0);
}, 60_000);

/** Opens a session of `steps` one-token steps on a 20-token context and closes it, waiting until the shim has let it go. */
async function oneSession(shim: ShimServer, steps: number): Promise<void> {
  const client = new GrpcCloudClient({ address: shim.address });
  try {
    const context = Array.from({ length: 20 }, (_, i) => 1 + ((i * 37) % 400));
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'prefix-cache-bytes' });
    try {
      for (let k = 0; k < steps; k++) {
        const reply = await conversation.next({
          context,
          sources: context.map(() => 'prompt'),
          tokenIndex: k,
          maxTokens: 1,
          temperature: 0,
          topP: 1,
          stopTokenIds: [],
          routerScore: 0.2,
          threshold: 0.5,
          topLogprobs: 0,
        });
        context.push(reply.tokens[0]!);
      }
    } finally {
      await conversation.close();
    }
    for (let waited = 0; shim.store.count > 0 && waited < 5_000; waited += 10) await Bun.sleep(10);
    expect(shim.store.count).toBe(0);
  } finally {
    await client.close();
  }
}

test("the shim child's stats carry its prefix cache's bytes, exactly as the cache counts them", async () => {
  const shim = await startTestShim({ prefixCacheMb: 64 });
  try {
    const cache = (shim.backend as EmbeddedBackend).prefixCache!;
    expect((await shimStats(shim, false, startLoopLagProbe().stop())).prefixCacheBytes).toBe(0);
    await oneSession(shim, 4);
    const stats = await shimStats(shim, true, startLoopLagProbe().stop());
    expect(cache.stats.bytes).toBeGreaterThan(0);
    expect(stats.prefixCacheBytes).toBe(cache.stats.bytes);
  } finally {
    await shim.shutdown(1_000);
  }
}, 30_000);

test('a shim without a prefix cache reports 0 bytes of it', async () => {
  const shim = await startTestShim({ prefixCacheMb: 0 });
  try {
    expect(shim.backend instanceof EmbeddedBackend && shim.backend.prefixCache).toBeUndefined();
    await oneSession(shim, 2);
    expect((await shimStats(shim, false, startLoopLagProbe().stop())).prefixCacheBytes).toBe(0);
  } finally {
    await shim.shutdown(1_000);
  }
}, 30_000);

test('bad flags are usage errors', () => {
  const zero = bench('--duration', '0');
  expect(zero.code).toBe(2);
  expect(zero.stderr).toStartWith('error: --duration must be in [1, 300], got 0');
  const word = bench('--streams', 'many');
  expect(word.code).toBe(2);
  expect(word.stderr).toStartWith('error: --streams must be an integer, got "many"');
  const unknown = bench('--rps', '5');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("Unknown option '--rps'");
  const help = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'help'], { stdout: 'pipe' });
  expect(help.stdout.toString()).toContain('bench load');
});
