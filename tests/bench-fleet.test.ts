/** `bun run bench fleet`: a short sweep against both backends, the JSON and the plot, and its usage errors. */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { lastJsonLine, runBench } from './helpers/run-bench.ts';

const dir = mkdtempSync(join(tmpdir(), 'bench-fleet-'));

const bench = (...args: string[]) => runBench(['fleet', ...args]);

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a short sweep: every row served without errors, the fake finds contexts cached, knees and batching per setup, a plot', () => {
  const plot = join(dir, 'fleet.svg');
  // 5 ms per edge token: a 128-token generation fits in the 2 s rows, so sessions churn within one.
  const r = bench('--edges', '1,4', '--duration', '2', '--token-ms', '5', '--plot', plot, '--json');
  expect(r.stderr).not.toContain('error:');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.slice(0, -1).join('\n')).toMatch(/\| fake \| 4 \| 88\.9 \| [\d.]+ \| [\d.]+ \/ [\d.]+ \|/);
  const result = lastJsonLine(r.stdout);
  expect(result.rows.map((row: { backend: string; max_batch: number | null; edges: number }) => [row.backend, row.max_batch, row.edges])).toEqual([
    ['fake', null, 1],
    ['fake', null, 4],
    ['embedded', 1, 1],
    ['embedded', 1, 4],
    ['embedded', 8, 1],
    ['embedded', 8, 4],
  ]);
  for (const row of result.rows) {
    expect(row.errors).toBe(0);
    expect(row.error_messages).toBeUndefined();
    expect(row.steps).toBeGreaterThan(0);
    expect(row.steps_per_s).toBe(Math.round((row.steps / 2) * 10) / 10);
    for (const key of [
      'p50_added_ms',
      'p99_added_ms',
      'p50_shim_ms',
      'p99_shim_ms',
      'p50_round_trip_ms',
      'p99_round_trip_ms',
      'shim_cpu_ms_per_step',
      'load_cpu_ms_per_step',
      'load_loop_lag_p99_ms',
      'shim_loop_lag_p99_ms',
      'load_loop_lag_max_ms',
      'shim_loop_lag_max_ms',
      'cached_share',
    ])
      expect(typeof row[key]).toBe('number');
    for (const lag of [row.load_loop_lag_p99_ms, row.shim_loop_lag_p99_ms]) expect(lag).toBeGreaterThanOrEqual(0);
    // The longest stall is at least the p99's.
    expect(row.load_loop_lag_max_ms).toBeGreaterThanOrEqual(row.load_loop_lag_p99_ms);
    expect(row.shim_loop_lag_max_ms).toBeGreaterThanOrEqual(row.shim_loop_lag_p99_ms);
    expect(row.p50_added_ms).toBeLessThanOrEqual(row.p99_added_ms);
    expect(row.p50_round_trip_ms).toBeLessThanOrEqual(row.p99_round_trip_ms);
    expect(row.p50_shim_ms).toBeLessThanOrEqual(row.p99_shim_ms);
    // The shim's own time is part of the round trip it reports beside its backend time.
    expect(row.p50_shim_ms).toBeLessThanOrEqual(row.p50_round_trip_ms);
    // What the shim adds is part of the round trip.
    expect(row.p50_added_ms).toBeLessThanOrEqual(row.p50_round_trip_ms);
    expect(row.shim_cpu_ms_per_step).toBeGreaterThan(0);
  }
  const fake = result.rows.filter((row: { backend: string }) => row.backend === 'fake');
  // 4 edges × 1000 / (9 edge tokens per routed step × 5 ms).
  expect(fake.map((row: { offered_steps_per_s: number }) => row.offered_steps_per_s)).toEqual([22.2, 88.9]);
  for (const row of fake) {
    expect(row.closed_loop).toBe(false);
    // Each step resends the context: the fake's prefix cache holds all but the new tokens.
    expect(row.cached_share).toBeGreaterThan(0.8);
    expect(row.generations).toBeGreaterThan(0);
  }
  for (const row of result.rows.filter((row: { backend: string }) => row.backend === 'embedded')) {
    expect(row.closed_loop).toBe(true);
    expect(row.offered_steps_per_s).toBeNull();
  }
  expect(Object.keys(result.knee).sort()).toEqual(['embedded max-batch 1', 'embedded max-batch 8', 'fake']);
  for (const knee of Object.values(result.knee) as { edges: number | null; base_p99_added_ms: number }[]) {
    expect(knee.edges === null || knee.edges === 4).toBe(true);
    expect(knee.base_p99_added_ms).toBeGreaterThan(0);
  }
  expect(result.batching.map((b: { edges: number; max_batch: number }) => [b.edges, b.max_batch])).toEqual([
    [1, 8],
    [4, 8],
  ]);
  expect(result.settings.pace).toEqual({ tokenMs: 5, share: 0.1, span: 1, genTokens: 128 });
  expect(result.plot).toBe(plot);
  const svg = readFileSync(plot, 'utf8');
  expect(svg).toStartWith('<svg');
  expect(svg).toContain('Routed steps served per second by one shim');
  expect(svg).toContain('p99 latency the shim and the network add to a step');
  expect(svg).toContain('embedded max-batch 8');
}, 90_000);

test('--overload 2: capacity measured, an unloaded row, then fixed τ and a wait budget at twice the capacity', () => {
  const r = bench('--overload', '2', '--duration', '2', '--json');
  expect(r.code).toBe(0);
  const result = lastJsonLine(r.stdout);
  const capacity = result.capacity_steps_per_s;
  expect(capacity).toBeGreaterThan(0);
  expect(result.rows.map((row: { policy: string; load: string }) => [row.policy, row.load])).toEqual([
    ['threshold', 'unloaded'],
    ['threshold', 'overloaded'],
    ['wait-budget', 'overloaded'],
  ]);
  const [unloaded, fixed, budget] = result.rows;
  // Offered load per edge: 1000 / (9 edge tokens per routed step × 25 ms); as many edges as make 2 × capacity.
  const perEdge = 1000 / (9 * 25);
  expect(fixed.edges).toBe(Math.ceil((2 * capacity) / perEdge));
  expect(budget.edges).toBe(fixed.edges);
  expect(unloaded.edges).toBe(Math.max(1, Math.round((0.25 * capacity) / perEdge)));
  // Without --route-wait-ms the budget is twice the unloaded p99, rounded up.
  expect(budget.wait_budget_ms).toBe(Math.ceil(2 * unloaded.p99_wait_ms));
  expect(fixed.wait_budget_ms).toBeNull();
  for (const row of result.rows) {
    expect(row.unloaded_p99_wait_ms).toBe(unloaded.p99_wait_ms);
    expect(row.p50_wait_ms).toBeLessThanOrEqual(row.p99_wait_ms);
    expect(row.fallback_tokens).toBe(row.overloaded_steps + row.late_steps + row.failed_steps);
    expect(row.failed_generations).toBeLessThanOrEqual(row.generations);
    expect(row.realized_share_min).toBeLessThanOrEqual(row.realized_share);
    expect(row.realized_share).toBeLessThanOrEqual(row.realized_share_max);
    expect(row.realized_share_max).toBeLessThanOrEqual(1);
  }
  expect(result.settings).toMatchObject({ factor: 2, slots: 2, serviceMs: 10 });
  expect(r.stdout).toContain('| wait-budget | overloaded |');
}, 90_000);

test('bad flags are usage errors', () => {
  const edges = bench('--edges', '1,x');
  expect(edges.code).toBe(2);
  expect(edges.stderr).toStartWith('error: --edges: whole numbers from 1 to 1024, comma-separated, got "1,x"');
  const backend = bench('--backend', 'vllm');
  expect(backend.code).toBe(2);
  expect(backend.stderr).toStartWith('error: --backend: fake and/or embedded, comma-separated, got "vllm"');
  const cpus = bench('--shim-cpus', 'first');
  expect(cpus.code).toBe(2);
  expect(cpus.stderr).toStartWith('error: --shim-cpus must be a CPU list like "1", "0,2" or "2-3", got "first"');
  const share = bench('--share', '2');
  expect(share.code).toBe(2);
  expect(share.stderr).toStartWith('error: --share must be in [0.001, 1], got 2');
  const overload = bench('--overload', 'lots');
  expect(overload.code).toBe(2);
  expect(overload.stderr).toStartWith('error: --overload must be a number, got "lots"');
  const slots = bench('--slots', '0');
  expect(slots.code).toBe(2);
  expect(slots.stderr).toStartWith('error: --slots must be in [1, 100000], got 0');
});
