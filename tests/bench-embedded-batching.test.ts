/** `bun run bench embedded-batching`: the embedded backend's own batching, per routed share, no gRPC. */
import { beforeAll, expect, test } from 'bun:test';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { lastJsonLine, runBench } from './helpers/run-bench.ts';

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

test('one-token steps share passes; the ten-token steps of a 10% routed share run one pass each at most, never batched', () => {
  const r = runBench(['embedded-batching', '--sessions', '8', '--duration', '1', '--share', '0.1,1', '--max-batch', '1,8', '--json']);
  expect(r.stderr).not.toContain('error');
  expect(r.code).toBe(0);
  const { rows } = lastJsonLine(r.stdout);
  expect(rows.map((row: { share: number; max_batch: number }) => [row.share, row.max_batch])).toEqual([
    [0.1, 1],
    [0.1, 8],
    [1, 1],
    [1, 8],
  ]);
  for (const row of rows) expect(row.steps).toBeGreaterThan(50);
  const [tenAlone, tenBatched, oneAlone, oneBatched] = rows;
  // Every step is one append, hence one pass, unless the batcher puts one-token appends together, or the
  // first prompts of sessions opening together (never more passes than alone).
  for (const row of [tenAlone, oneAlone]) expect(row.passes_per_step).toBe(1);
  expect(tenBatched.passes_per_step).toBeLessThanOrEqual(1);
  for (const row of [tenAlone, tenBatched, oneAlone]) expect(row.pass_sizes).toEqual({});
  expect(oneBatched.passes_per_step).toBeLessThan(0.9);
  expect(Object.keys(oneBatched.pass_sizes).length).toBeGreaterThan(0);
}, 120_000);
