/** `bun run bench embedded-batching`: the embedded backend's own batching, per routed share, no gRPC. */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO } from '../src/shared/paths.ts';
import { convertLlama2c } from '../src/tools/models/convert-llama2c.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { compareWithAlone, type EmbeddedBatchingRow } from '../src/tools/bench/embedded-batching.ts';
import { lastJsonLine, runBench } from './helpers/run-bench.ts';

const work = mkdtempSync(join(tmpdir(), 'bench-embedded-batching-'));
const fusedCloud = join(work, 'cloud-fused');

beforeAll(async () => {
  await ensureDemoPacks();
  await convertLlama2c({ checkpoint: DEMO.checkpoint, tokenizer: DEMO.tokenizer, out: fusedCloud, layout: 'fused' });
}, 180_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

test('one-token steps share passes; the ten-token steps of a 10% routed share do with --append-tokens 16, never with 1', () => {
  const r = runBench([
    'embedded-batching',
    '--sessions',
    '8',
    '--duration',
    '1',
    '--share',
    '0.1,1',
    '--max-batch',
    '1,8',
    '--append-tokens',
    '1,16',
    '--json',
  ]);
  expect(r.stderr).not.toContain('error');
  expect(r.code).toBe(0);
  const { rows } = lastJsonLine(r.stdout);
  // --append-tokens matters only where passes can be shared.
  expect(rows.map((row: { share: number; max_batch: number; append_tokens: number }) => [row.share, row.max_batch, row.append_tokens])).toEqual([
    [0.1, 1, 1],
    [0.1, 8, 1],
    [0.1, 8, 16],
    [1, 1, 1],
    [1, 8, 1],
    [1, 8, 16],
  ]);
  for (const row of rows) expect(row.steps).toBeGreaterThan(50);
  const [tenAlone, tenOneToken, tenAppends, oneAlone, ...oneBatched] = rows;
  // Every step is one append, hence one pass, unless the batcher puts appends together, or the first
  // prompts of sessions opening together (never more passes than alone).
  for (const row of [tenAlone, oneAlone]) expect(row.passes_per_step).toBe(1);
  expect(tenOneToken.passes_per_step).toBeLessThanOrEqual(1);
  for (const row of [tenAlone, tenOneToken, oneAlone]) expect(row.pass_sizes).toEqual({});
  for (const row of [tenAppends, ...oneBatched]) {
    expect(row.passes_per_step).toBeLessThan(0.9);
    expect(Object.keys(row.pass_sizes).length).toBeGreaterThan(0);
  }
  // The demo cloud pack is the plain layout: its passes gather every row's cache.
  for (const row of rows) expect(row.passes_on_kept_buffers).toBe(0);
  // Each row against its share's --max-batch 1 row, over all and inside onnxruntime's runs alone.
  for (const row of rows) {
    expect(row.run_ms_per_step).toBeGreaterThan(0);
    expect(row.run_ms_per_step).toBeLessThan(1000 / row.steps_per_s);
  }
  for (const row of [tenAlone, oneAlone]) expect([row.x_alone, row.run_x_alone]).toEqual([1, 1]);
  expect(oneBatched[0].x_alone).toBe(Math.round((oneBatched[0].steps_per_s / oneAlone.steps_per_s) * 100) / 100);
  // One-token steps in passes of eight: fewer, fuller runs, so less time inside onnxruntime per step.
  expect(oneBatched[0].run_x_alone).toBeGreaterThan(1);
  expect(r.stdout).toContain('× max-batch 1 inside onnxruntime (ceiling)');
}, 120_000);

test('--threads: the backend runs with that many threads per pass, said in the header; a bad count is refused', () => {
  const r = runBench(['embedded-batching', '--sessions', '4', '--duration', '1', '--share', '1', '--max-batch', '4', '--threads', '2', '--json']);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain('2 threads), 4 sessions for 1 s per row');
  expect(lastJsonLine(r.stdout).rows[0].steps).toBeGreaterThan(20);
  const bad = runBench(['embedded-batching', '--threads', '-1']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('--threads');
}, 120_000);

test("compareWithAlone: each row over its own share's --max-batch 1 row; none without one", () => {
  const row = (share: number, maxBatch: number, stepsPerS: number, runMsPerStep: number): EmbeddedBatchingRow => ({
    share,
    max_batch: maxBatch,
    append_tokens: 1,
    sessions: 8,
    steps: 100,
    steps_per_s: stepsPerS,
    passes_per_step: 1,
    pass_sizes: {},
    passes_on_kept_buffers: 0,
    run_ms_per_step: runMsPerStep,
    x_alone: null,
    run_x_alone: null,
  });
  const rows = [row(0.1, 1, 1000, 0.5), row(0.1, 8, 1500, 0.2), row(1, 8, 3000, 0.1)];
  compareWithAlone(rows);
  expect(rows.map((r) => [r.x_alone, r.run_x_alone])).toEqual([
    [1, 1],
    [1.5, 2.5],
    [null, null],
  ]);
});

test('--pack: a fused cloud pack; passes over the sessions of the pass before feed its batch buffers again', () => {
  const r = runBench(['embedded-batching', '--pack', fusedCloud, '--sessions', '8', '--duration', '1', '--share', '1', '--max-batch', '8', '--json']);
  expect(r.stderr).not.toContain('error');
  expect(r.code).toBe(0);
  expect(r.stdout).toContain(`(${fusedCloud}, one thread)`);
  const [row] = lastJsonLine(r.stdout).rows;
  expect(row.steps).toBeGreaterThan(50);
  const batchedPasses = Object.values(row.pass_sizes as Record<string, number>).reduce((a, b) => a + b, 0);
  // Eight sessions stepping together come back together: most passes run the rows of the pass before.
  expect(row.passes_on_kept_buffers).toBeGreaterThan(batchedPasses / 2);
  expect(row.passes_on_kept_buffers).toBeLessThanOrEqual(batchedPasses);
}, 120_000);
