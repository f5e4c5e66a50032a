/** `bun run bench score-flood`: a short run through the CLI with a shim and a Score flood of their own processes, and its usage errors. */
import { beforeAll, expect, test } from 'bun:test';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

function bench(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'score-flood', ...args], { stdout: 'pipe', stderr: 'pipe', timeout: 90_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

test('a short run: every routed step answered in both phases, the flood scored full windows, the ratio is p99 over p99', () => {
  const r = bench('--seconds', '1', '--rounds', '1', '--streams', '2', '--callers', '2', '--top-k', '3', '--json');
  expect(r.stderr).not.toContain('error');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.slice(0, -1).join('\n')).toMatch(/p99 beside the flood \/ alone\s+\d+\.\d{2}×/);
  const result = JSON.parse(lines.at(-1)!);
  expect(result).toMatchObject({ streams: 2, callers: 2, top_k: 3, seconds: 1, rounds: 1, error_messages: [] });
  for (const phase of [result.alone, result.beside_flood]) {
    expect(phase.errors).toBe(0);
    // Sessions run to their last step: whole sessions of 32 one-token steps.
    expect(phase.steps % 32).toBe(0);
    expect(phase.steps).toBeGreaterThan(0);
    expect(phase.p99_ms).toBeGreaterThanOrEqual(phase.p50_ms);
  }
  expect(result.targets.every_step_answered).toBe(true);
  expect(result.beside_flood.score_errors).toBe(0);
  // Each call is a full window of the cloud model (512 ids, 511 positions).
  expect(result.beside_flood.score_positions).toBe(result.beside_flood.score_calls * 511);
  expect(result.p99_ratio).toBeCloseTo(result.beside_flood.p99_ms / result.alone.p99_ms, 2);
  expect(result.targets.p99_within_2x).toBe(result.p99_ratio <= 2);
}, 120_000);

test('flags out of range are usage errors', () => {
  const r = bench('--callers', '0');
  expect(r.code).not.toBe(0);
  expect(r.stderr).toContain('--callers');
});
