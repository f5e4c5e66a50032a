/**
 * The metrics panel's summary in plain words, for each kind of run (cloud used, edge alone, cloud down), and
 * every figure of the old panel still there under the fold. The browser side (visible rows, the fold opening)
 * is in page-run-panel.test.ts.
 */
import { CloudDisclosure } from '../src/edge/cloud/cloud-disclosure.ts';
import { expect, test } from 'bun:test';
import { MetricsRecorder, type GenerationMetrics } from '../src/edge/loop/generation-metrics.ts';
import { thresholdReport } from '../src/edge/routing/routing-budget-report.ts';
import { summaryRows } from '../views/metrics-rows.ts';
import { MetricsPanel } from '../views/run-fragments.tsx';

/** A generation of `sources`, with its clock-driven figures set to round values. */
function run(sources: ('slm' | 'llm' | 'fallback')[], times: Partial<GenerationMetrics>): GenerationMetrics {
  const recorder = new MetricsRecorder(5);
  for (const source of sources) recorder.token(source);
  return { ...recorder.finish(thresholdReport(0.5), new CloudDisclosure().report()), ...times };
}

const values = (m: GenerationMetrics) => summaryRows(m).map(([label, value]) => `${label}: ${value}`);

test('the summary: tokens, the share from the cloud, speed over the whole run, and the cloud time per cloud token', () => {
  const joint = run(['slm', 'llm', 'slm', 'llm'], { totalMs: 200, ttftMs: 20, cloudMs: 50 });
  expect(values(joint)).toEqual([
    'Tokens written: 4',
    'From the cloud: 2 of 4 (50.0%)',
    'Speed: 20.0 tokens/s, the first after 20.0 ms',
    'Cloud time: 50.0 ms for 2 tokens, 25.0 ms each',
  ]);
  expect(values(run(['llm'], { totalMs: 100, ttftMs: 100, cloudMs: 30 })).at(-1)).toBe('Cloud time: 30.0 ms for 1 token, 30.0 ms each');
});

test('the edge alone, a cloud that never answered, and a run with no tokens say so instead of dividing by zero', () => {
  expect(values(run(['slm', 'slm'], { totalMs: 40, ttftMs: 10, cloudMs: 0 })).slice(1)).toEqual([
    'From the cloud: 0 of 2 (0.0%)',
    'Speed: 50.0 tokens/s, the first after 10.0 ms',
    'Cloud time: none: every token came from the edge model',
  ]);
  expect(values(run(['fallback', 'fallback'], { totalMs: 4000, ttftMs: 2000, cloudMs: 3900 })).at(-1)).toBe(
    'Cloud time: 3900.0 ms waiting, no token came back',
  );
  expect(values(run([], { totalMs: 5, ttftMs: 5, cloudMs: 0 })).slice(2, 3)).toEqual(['Speed: no tokens']);
});

test('the panel: the summary first, then every other figure inside a closed <details>, each data-metric once', async () => {
  const html = String(await MetricsPanel({ metrics: run(['slm', 'llm'], { totalMs: 100, ttftMs: 10, cloudMs: 20 }), mode: 'joint' }).toString());
  const [summary, fold] = html.split('<details');
  expect(summary!.match(/data-metric="[^"]+"/g)).toEqual(['data-metric="tokens"', 'data-metric="routed"', 'data-metric="speed"', 'data-metric="cloud-cost"']);
  expect(fold!.startsWith(' class="metrics-more" data-testid="metrics-more"><summary>More details</summary>')).toBe(true);
  expect(fold!.match(/data-metric="([^"]+)"/g)!.map((m) => m.slice(13, -1))).toEqual([
    'policy',
    'budget',
    'fallback',
    'cached',
    'ttft',
    'tbt',
    'slm',
    'batch',
    'router',
    'cloud',
    'speculation',
    'speculate',
    'total',
  ]);
  expect(html).toContain('<dd data-metric="routed" data-value="1">1 of 2 (50.0%)</dd>');
});
