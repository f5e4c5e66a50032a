import { beforeAll, expect, test } from 'bun:test';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

function bench(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

// Building the demo packs (router training included) takes about half a minute on a fresh checkout.
beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

test('bench edge on the demo pair: a table, then one JSON line with the figures of one run', () => {
  const r = bench('edge', '--tokens', '24', '--runs', '2', '--json');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.slice(0, -1).join('\n')).toMatch(/TBT ratio\s+\d\.\d{3}/);
  const result = JSON.parse(lines.at(-1)!);
  expect(result.target).toBe('demo:stories260k-distilled-1l');
  expect(result.hidden_size).toBe(64);
  expect(result.tokens_per_run).toBe(24);
  for (const key of ['slm_step_ms', 'router_ms', 'tbt_ms_no_routing', 'tbt_ms_routing']) expect(result[key]).toBeGreaterThan(0);
  expect(result.routed_ratio).toBeGreaterThanOrEqual(0.2);
  expect(result.routed_ratio).toBeLessThan(1);
  expect(result.tbt_ratio).toBeCloseTo(result.tbt_ms_routing / result.tbt_ms_no_routing, 10);
  // The reference design's method (whole sequence per token) on the same pack and tokens.
  expect(result.tbt_ms_reprefill).toBeGreaterThan(0);
  expect(result.speedup_vs_reprefill).toBeCloseTo(result.tbt_ms_reprefill / result.tbt_ms_no_routing, 10);
  expect(lines.slice(0, -1).join('\n')).toMatch(/whole sequence recomputed per token\s+\d+\.\d{3} ms/);
}, 30_000);

test('bench: unknown targets and bad flags are usage errors', () => {
  const unknown = bench('gpu');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toStartWith('error: unknown target gpu (known: edge');
  const flags = bench('edge', '--preset', 'qwen2.5-0.5b', '--pack', 'x');
  expect(flags.code).toBe(2);
  expect(flags.stderr).toStartWith('error: --preset cannot be combined with --pack or --router');
  const help = bench('help');
  expect(help.stdout).toContain('bench edge');
});
