/**
 * How a batched run shows: the `done` metrics' meanBatchSize on the page's metrics panel, and in
 * Prometheus (the generations' histogram, and the batcher's rows per pass read at each scrape).
 */
import { CloudDisclosure } from '../src/edge/cloud/cloud-disclosure.ts';
import { expect, test } from 'bun:test';
import { EdgeMetrics } from '../src/edge/metrics/edge-metrics.ts';
import { MetricsRecorder } from '../src/edge/loop/generation-metrics.ts';
import { thresholdReport } from '../src/edge/routing/routing-budget-report.ts';
import { MetricsPanel } from '../views/run-fragments.tsx';

function metricsWith(batchSizes: number[]) {
  const recorder = new MetricsRecorder(3);
  for (const rows of batchSizes) recorder.decodePass(rows);
  return recorder.finish(thresholdReport(0.5), new CloudDisclosure().report());
}

test('meanBatchSize: the mean rows of the decode passes, 0 before any', () => {
  expect(metricsWith([]).meanBatchSize).toBe(0);
  expect(metricsWith([1, 1]).meanBatchSize).toBe(1);
  expect(metricsWith([4, 3, 2, 3]).meanBatchSize).toBe(3);
});

test('the page says whether a run was batched', async () => {
  const render = async (sizes: number[]) => String(await MetricsPanel({ metrics: metricsWith(sizes), mode: 'small_only' }).toString());
  expect(await render([4, 2])).toContain('<dd data-metric="batch">yes, 3.00 rows per step</dd>');
  expect(await render([1, 1])).toContain('<dd data-metric="batch">no, each step ran alone</dd>');
});

test('Prometheus: the generations by mean batch size, the rows per pass of the batcher and the prompts it fed together', async () => {
  const metrics = new EdgeMetrics();
  const stats = { passes: 4, rows: 10, sizes: [0, 1, 0, 3], promptsTogether: 5, keptBuffersReused: 2, keptRowsCopied: 1 };
  metrics.describeBatching(stats);
  metrics.observe(
    { type: 'done', finishReason: 'length', text: '', metrics: metricsWith([3, 3]), requestId: 'r1', router: 'builtin', cloudText: '' },
    'small_only',
  );
  const text = await metrics.registry.metrics();
  expect(text).toContain('edge_decode_rows_per_pass 2.5');
  expect(text).toContain('edge_prompts_fed_together 5');
  expect(text).toContain('edge_decode_passes_on_kept_buffers 2');
  expect(text).toContain('edge_generation_batch_size_bucket{le="3"} 1');
  expect(text).toContain('edge_generation_batch_size_bucket{le="2"} 0');
  metrics.describeBatching(undefined);
  const off = await metrics.registry.metrics();
  expect(off).toContain('edge_decode_rows_per_pass 1');
  expect(off).toContain('edge_prompts_fed_together 0');
});
