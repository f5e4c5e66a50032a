/**
 * What left the box, in Prometheus: each finished generation's `metrics.cloud` (cloud-disclosure.ts) is added to
 * the edge's counters of token ids, bytes and hidden-state bytes sent, placeholders the cloud read and positions
 * withheld. The disclosures here are written by hand through CloudDisclosure, so the sums are exact;
 * openai-private-spans.test.ts checks the counters against a real generation's usage.
 */
import { expect, test } from 'bun:test';
import { CloudDisclosure, type DisclosureReport } from '../src/edge/cloud/cloud-disclosure.ts';
import { EdgeMetrics } from '../src/edge/metrics/edge-metrics.ts';
import type { DoneEvent } from '../src/edge/loop/generation-events.ts';
import { MetricsRecorder } from '../src/edge/loop/generation-metrics.ts';
import { thresholdReport } from '../src/edge/routing/routing-budget-report.ts';

function doneWith(cloud: DisclosureReport): DoneEvent {
  const metrics = new MetricsRecorder(4).finish(thresholdReport(0.5), cloud);
  return { type: 'done', finishReason: 'length', text: '', metrics, requestId: 'r1', router: 'builtin', cloudText: '' };
}

const SERIES = [
  'edge_cloud_tokens_sent_total',
  'edge_cloud_bytes_sent_total',
  'edge_cloud_hidden_state_bytes_total',
  'edge_private_placeholders_total',
  'edge_private_withheld_steps_total',
];

function values(text: string): number[] {
  return SERIES.map((name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]));
}

test('every series is a counter with a help text, at 0 before any generation', async () => {
  const text = await new EdgeMetrics().registry.metrics();
  for (const name of SERIES) {
    expect(text).toMatch(new RegExp(`^# HELP ${name} \\S.{20,}$`, 'm'));
    expect(text).toContain(`# TYPE ${name} counter`);
  }
  expect(values(text)).toEqual([0, 0, 0, 0, 0]);
});

test('each done event adds its metrics.cloud, a generation that sent nothing adds nothing', async () => {
  const metrics = new EdgeMetrics();
  // A generation with private values: an opening of 6 ids, two steps (one with a hidden state of 8 floats), two placeholders, one position kept home.
  const first = new CloudDisclosure();
  first.sent([{ open: { requestId: 'r1', contextIds: [1, 403, 9, 9, 12, 7] } }, { step: { offset: 6, ids: [31], slmHiddenState: new Array(8).fill(0.5) } }]);
  first.sent([{ step: { offset: 8, ids: [] } }]);
  first.placeholders.add('[NAME_1]');
  first.placeholders.add('[EMAIL_1]');
  first.withheldSteps = 1;
  // One without: a reopened stream (its whole context again) and nothing private.
  const second = new CloudDisclosure();
  second.sent([
    { open: { requestId: 'r2', contextIds: [1, 2, 3] } },
    { open: { requestId: 'r2', contextIds: [1, 2, 3, 4] } },
    { step: { offset: 4, ids: [5, 6] } },
  ]);
  const [a, b] = [first.report(), second.report()];
  expect([a.tokensSent, a.hiddenStateBytes, a.placeholders, a.withheldSteps, a.steps, a.streams]).toEqual([7, 32, 2, 1, 2, 1]);
  expect([b.tokensSent, b.hiddenStateBytes, b.placeholders, b.withheldSteps, b.steps, b.streams]).toEqual([9, 0, 0, 0, 1, 2]);

  metrics.observe(doneWith(a), 'joint');
  expect(values(await metrics.registry.metrics())).toEqual([7, a.bytesSent, 32, 2, 1]);
  metrics.observe(doneWith(b), 'llm_only');
  metrics.observe(doneWith(new CloudDisclosure().report()), 'small_only');
  expect(values(await metrics.registry.metrics())).toEqual([16, a.bytesSent + b.bytesSent, 32, 2, 1]);
  expect(a.bytesSent).toBeGreaterThan(32);
});
