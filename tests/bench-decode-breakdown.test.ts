/** `bench decode --breakdown`: a real run on the demo edge pack, one row per thread count, its parts adding up. */
import { expect, test } from 'bun:test';
import { DEMO } from '../src/shared/paths.ts';
import { decodeBreakdown, formatBreakdown } from '../src/tools/bench/decode-breakdown.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

test('each thread count gets a row; run + rest is the step, the shares add up to one, the table names every part', async () => {
  await ensureDemoPacks();
  const rows = await decodeBreakdown({ dir: DEMO.edgePack, threadCounts: [1, 2], promptTokens: 12, steps: 6, log: () => {} });
  expect(rows.map((r) => r.threads)).toEqual([1, 2]);
  for (const r of rows) {
    // run and step are medians of separate series: close, not ordered.
    expect(r.run_ms).toBeGreaterThan(0);
    expect(r.run_ms).toBeLessThanOrEqual(r.step_ms * 1.5);
    expect(r.router_ms).toBeGreaterThan(0);
    const shares = Object.values(r.shares).reduce((a, b) => a + b, 0);
    expect(shares).toBeCloseTo(
      (r.run_ms + r.append_rest_ms + r.argmax_ms + r.sample_ms + r.router_ms) / (r.step_ms + r.argmax_ms + r.sample_ms + r.router_ms),
      9,
    );
  }
  const table = formatBreakdown(rows).split('\n');
  expect(table).toHaveLength(3);
  expect(table[0]).toContain('router ms');
});
