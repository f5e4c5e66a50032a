/** `bun run bench load`: a short run with few streams, and its usage errors. */
import { beforeAll, expect, test } from 'bun:test';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

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
  expect(result.shim_sessions_end).toBe(0);
  expect(result.shim_context_tokens_end).toBe(0);
  expect(result.shim_streams_end).toBe(0);
  // The cap is the number of streams, and so is the number of live KV caches: nothing is evicted.
  expect(result.shim_evictions).toBe(0);
}, 60_000);

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
