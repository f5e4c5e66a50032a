/**
 * `bun run bench constraint` as its user runs it, on a tiny random-weight pack with the real Qwen tokenizer:
 * the report's figures are present and consistent with each other (no speed is asserted), and bad flags
 * are usage errors.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConstraintBenchResult } from '../src/tools/bench/constraint-report.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { lastJsonLine, runBench } from './helpers/run-bench.ts';

const work = mkdtempSync(join(tmpdir(), 'bench-constraint-'));
const pack = join(work, 'qwen');

beforeAll(async () => {
  await writeRandomPack({ preset: 'tiny-qwen2', out: pack, seed: 5, hiddenStatesOutput: true });
}, 120_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

test('a run on a tiny Qwen-vocabulary pack: every figure, the ratios from their parts, the targets', () => {
  const run = runBench(['constraint', '--pack', pack, '--tokens', '4', '--rounds', '2', '--json'], 240_000);
  expect(run.stderr).not.toContain('error');
  expect(run.code).toBe(0);
  const r = lastJsonLine(run.stdout) as ConstraintBenchResult;
  expect(r.target).toBe('pack');
  expect(r.vocab_size).toBe(151_936);
  expect([r.schema_properties, r.tokens_per_run, r.rounds]).toEqual([20, 4, 2]);
  expect(r.tbt_ratio).toBeCloseTo(r.tbt_ms_schema / r.tbt_ms_free, 12);
  expect(r.tbt_ratio_from_mask).toBeCloseTo(1 + r.mask_ms_per_token / r.tbt_ms_free, 12);
  expect(r.tbt_ratio_by_round.min).toBeLessThanOrEqual(r.tbt_ratio_by_round.median);
  expect(r.tbt_ratio_by_round.median).toBeLessThanOrEqual(r.tbt_ratio_by_round.max);
  for (const ms of [
    r.tbt_ms_free,
    r.tbt_ms_schema,
    r.mask_ms_per_token,
    r.compile_ms,
    r.compile_ms_after_decode,
    r.first_constraint_ms,
    r.first_token_ms_free,
  ]) {
    expect(ms).toBeGreaterThan(0);
  }
  expect(r.targets).toEqual({ tbt_ratio: 1.05, first_token_extra_ms: 100 });
  expect(run.stdout).toContain('20-property JSON schema');
});

test('bad flags are usage errors', () => {
  const few = runBench(['constraint', '--pack', pack, '--tokens', '2']);
  expect(few.code).toBe(2);
  expect(few.stderr).toContain('--tokens');
  const both = runBench(['constraint', '--pack', pack, '--preset', 'qwen2.5-0.5b']);
  expect(both.code).toBe(2);
  expect(both.stderr).toContain('--preset and --pack are alternatives');
});
