/**
 * How routing budgets enter and how their report leaves each surface, on the edge's real runtime and
 * servers: the --route-* defaults reach requests naming neither τ nor a budget; the page offers the three
 * fields (blank = unset) and lists the report in its metrics panel; a done event's report crosses the
 * gRPC wire field for field and becomes OpenAI's `usage.routing`; Prometheus shows the box's cut, budgets
 * and their use. The reports here are built by hand, so each mapping is checked against exact values;
 * routing-budget-report-e2e.test.ts checks what real generations report.
 */
import { CloudDisclosure } from '../src/edge/cloud/cloud-disclosure.ts';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Hono } from 'hono';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { EdgeMetrics } from '../src/edge/metrics/edge-metrics.ts';
import { startEdge } from '../src/edge/server/edge-server.ts';
import { toWireEvent } from '../src/edge/grpc/edge-grpc-server.ts';
import { edgeGeneratorService } from '../src/edge/grpc/edge-proto.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { usage } from '../src/edge/http/openai/openai-responses.ts';
import type { DoneEvent } from '../src/edge/loop/generation-events.ts';
import { MetricsRecorder, type GenerationMetrics } from '../src/edge/loop/generation-metrics.ts';
import { readGenerationRequest } from '../src/edge/request/generation-request-fields.ts';
import type { RoutingBudgetReport } from '../src/edge/routing/routing-budget-report.ts';
import type { RoutingStatus } from '../src/edge/routing/routing-status.ts';
import { MetricsPanel } from '../views/run-fragments.tsx';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

const SHARE_AND_WAIT: RoutingBudgetReport = {
  policy: 'share+wait',
  share: 0.25,
  waitMs: 300,
  threshold: 0.5,
  cut: 0.4375,
  meanCut: 0.40625,
  decided: 40,
  routedPositions: 9,
  realizedShare: 0.225,
  expectedWaitMs: 120.5,
  overloaded: 2,
};

const TOKENS: RoutingBudgetReport = {
  policy: 'tokens',
  tokensPerMinute: 20_000,
  threshold: 0.5,
  cut: 0.25,
  meanCut: 0.25,
  decided: 8,
  routedPositions: 2,
  realizedShare: 0.25,
  tokensLastMinute: 1234,
  overloaded: 0,
};

/** Real metrics of a short generation, with `budget` as the loop sets it on every done event. */
function metricsWith(budget: RoutingBudgetReport): GenerationMetrics {
  const recorder = new MetricsRecorder(3);
  for (const source of ['slm', 'llm', 'slm'] as const) recorder.token(source);
  return recorder.finish(budget, new CloudDisclosure().report());
}

function doneWith(budget: RoutingBudgetReport): DoneEvent {
  return { type: 'done', finishReason: 'length', text: 'abc', metrics: metricsWith(budget), requestId: 'r1', router: 'builtin', cloudText: '' };
}

let edge: TestEdge;
let app: Hono;

beforeAll(async () => {
  edge = await startTestEdge({ cloud: 'none', defaultBudget: { routeShare: 0.1, routeWaitMs: 300 } });
  app = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024 });
});
afterAll(async () => {
  await edge.release();
});

describe("the edge's default budgets", () => {
  test('apply to requests naming neither τ nor a budget, from every encoding', () => {
    const budgetOf = (body: Record<string, unknown>, encoding: 'typed' | 'form') => {
      const { routeShare, routeTokensPerMinute, routeWaitMs } = edge.runtime.check(readGenerationRequest(body, encoding));
      return { routeShare, routeTokensPerMinute, routeWaitMs };
    };
    const unset = { routeShare: undefined, routeTokensPerMinute: undefined, routeWaitMs: undefined };
    expect(budgetOf({ prompt: 'Once' }, 'typed')).toEqual({ ...unset, routeShare: 0.1, routeWaitMs: 300 });
    // A request that names τ gets exactly τ; one that names a budget gets only its own.
    expect(budgetOf({ prompt: 'Once', threshold: 0.7 }, 'typed')).toEqual(unset);
    expect(budgetOf({ prompt: 'Once', route_tokens_per_minute: 600 }, 'typed')).toEqual({ ...unset, routeTokensPerMinute: 600 });
    // The page's blank inputs are unset; its slider always names τ.
    const blank = { route_share: '', route_tokens_per_minute: '', route_wait_ms: '' };
    expect(budgetOf({ prompt: 'Once', ...blank }, 'form')).toEqual({ ...unset, routeShare: 0.1, routeWaitMs: 300 });
    expect(budgetOf({ prompt: 'Once', threshold: '0.7', ...blank }, 'form')).toEqual(unset);
    expect(budgetOf({ prompt: 'Once', threshold: '0.7', ...blank, route_share: '0.2' }, 'form')).toEqual({ ...unset, routeShare: 0.2 });
  });
});

test('/api/info names the default budgets as the request fields do', async () => {
  const info = (await (await app.request('/api/info')).json()) as Record<string, unknown>;
  expect(info.default_budget).toEqual({ route_share: 0.1, route_wait_ms: 300 });
  expect(info.limits).toEqual({ max_prompt_chars: 16_384, max_new_tokens: 1024, max_route_span: 16, max_concurrent: 4 });
});

test("the started edge's --route-* settings become its requests' defaults", async () => {
  const config = parseEdgeConfig(
    ['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', 'none', '--log-level', 'error', '--route-share', '0.15'],
    {
      EDGE_ROUTE_TOKENS_PER_MINUTE: '600',
    },
  );
  const running = await startEdge(config);
  try {
    const info = (await (await fetch(new URL('/api/info', running.url))).json()) as Record<string, unknown>;
    expect(info.default_budget).toEqual({ route_share: 0.15, route_tokens_per_minute: 600 });
  } finally {
    await running.stop();
  }
});

describe('the page', () => {
  test("offers the three budgets, filled with the edge's defaults, blank where unset", async () => {
    const html = await (await app.request('/')).text();
    const input = (name: string, value: string, range: string) =>
      `<input id="${name}" name="${name}" type="number" value="${value}" placeholder="blank = unset" aria-describedby="${name}-help" ${range}/>`;
    expect(html).toContain('<label for="route_share">Routed share budget</label>');
    expect(html).toContain(input('route_share', '0.1', 'min="0" max="1" step="0.01"'));
    expect(html).toContain(input('route_tokens_per_minute', '', 'min="1" step="1"'));
    expect(html).toContain(input('route_wait_ms', '300', 'min="1" step="1"'));
    expect(html).toContain('<small id="route_wait_ms-help" class="legend">fewer tokens routed as the round trip grows</small>');
  });

  test("a run's title names its budgets in place of τ", async () => {
    const title = async (fields: Record<string, string>) => {
      const body = new URLSearchParams({ prompt: 'Once', max_new_tokens: '2', ...fields });
      const panel = await (await app.request('/runs', { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } })).text();
      // Read the run's events so it finishes and gives its slot back.
      await (await app.request(`/runs/${panel.match(/\/runs\/([0-9a-f-]+)\/events/)![1]}/events`)).text();
      return panel.match(/<h2>(.*?)<\/h2>/s)![1];
    };
    expect(await title({ threshold: '0.7' })).toBe('joint<small class="legend"> τ=0.70</small>');
    expect(await title({ threshold: '0.7', route_share: '0.2', route_tokens_per_minute: '', route_wait_ms: '300' })).toBe(
      'joint<small class="legend"> share 0.2, wait ≤ 300 ms</small>',
    );
    expect(await title({ route_tokens_per_minute: '600' })).toBe('joint<small class="legend"> 600 cloud tokens/min</small>');
  });

  test('the metrics panel shows the policy, the effective cut, each budget and its use', async () => {
    const render = async (budget: RoutingBudgetReport, mode: 'joint' | 'small_only' = 'joint') =>
      String(await MetricsPanel({ metrics: metricsWith(budget), mode }).toString());
    const shareAndWait = await render(SHARE_AND_WAIT);
    expect(shareAndWait).toContain('<dd data-metric="policy">share+wait: cut 0.438 (mean 0.406)</dd>');
    expect(shareAndWait).toContain(
      '<dd data-metric="budget">routed 22.5% of positions (9 / 40), target 25.0%; expected wait 120.5 ms of 300 ms; 2 steps refused by an overloaded cloud</dd>',
    );
    expect(await render(TOKENS)).toContain('<dd data-metric="budget">routed 25.0% of positions (2 / 8); 1234 of 20000 cloud tokens per minute (box)</dd>');
    const threshold = { ...TOKENS, policy: 'threshold', tokensPerMinute: undefined, tokensLastMinute: undefined, cut: 0.5, meanCut: 0.5 };
    expect(await render(threshold)).toContain('<dd data-metric="policy">threshold: τ 0.50</dd>');
    // One model makes every token: no cut to show.
    expect(await render(SHARE_AND_WAIT, 'small_only')).not.toContain('data-metric="policy"');
  });
});

describe('the gRPC done message', () => {
  test('carries the report field for field (Metrics.budget)', () => {
    const wire = edgeGeneratorService.Generate.responseDeserialize(edgeGeneratorService.Generate.responseSerialize(toWireEvent(doneWith(SHARE_AND_WAIT))));
    const budget = wire.done!.metrics!.budget!;
    // Floats travel as float32: compared at its precision; the budgets given are exact (double, integers).
    expect(budget).toMatchObject({ policy: 'share+wait', share: 0.25, waitMs: 300, decided: 40, routedPositions: 9, overloaded: 2 });
    expect(budget.tokensPerMinute).toBeUndefined();
    expect(budget.tokensLastMinute).toBeUndefined();
    expect(budget.cut).toBeCloseTo(0.4375, 6);
    expect(budget.meanCut).toBeCloseTo(0.40625, 6);
    expect(budget.realizedShare).toBeCloseTo(0.225, 6);
    expect(budget.expectedWaitMs).toBeCloseTo(120.5, 4);
    expect(budget.threshold).toBeCloseTo(0.5, 6);
  });
});

describe('OpenAI usage', () => {
  test('gains routing: the report in snake_case', () => {
    expect(usage(metricsWith(TOKENS))).toEqual({
      prompt_tokens: 3,
      completion_tokens: 3,
      total_tokens: 6,
      prompt_tokens_details: { cached_tokens: 0 },
      routed_tokens: 1,
      fallback_tokens: 0,
      routing: {
        policy: 'tokens',
        tokens_per_minute: 20_000,
        threshold: 0.5,
        cut: 0.25,
        mean_cut: 0.25,
        decided: 8,
        routed_positions: 2,
        realized_share: 0.25,
        tokens_last_minute: 1234,
        overloaded: 0,
      },
      cloud: {
        tokens_sent: 0,
        bytes_sent: 0,
        hidden_state_bytes: 0,
        steps: 0,
        streams: 0,
        placeholders: 0,
        withheld_steps: 0,
        gate_blocked_steps: 0,
        pseudonym_ms: 0,
      },
    });
  });
});

describe('Prometheus', () => {
  // prom-client writes NaN as `Nan`; Prometheus parses either (Go's ParseFloat ignores case).
  test("the routing series are there on the real edge's /metrics, NaN where there is no cut or budget", async () => {
    const text = await (await app.request('/metrics')).text();
    for (const series of [
      'edge_routing_cut',
      'edge_routing_routed_share_recent',
      'edge_routing_wait_budget_ms',
      'edge_routing_expected_wait_ms',
      'edge_routing_tokens_per_minute_budget',
      'edge_routing_cloud_tokens_last_minute',
      'edge_routing_overloaded_steps_total',
    ]) {
      expect(text).toMatch(new RegExp(`^# TYPE ${series} (gauge|counter)$`, 'm'));
      expect(text).toMatch(new RegExp(`^${series} (Nan|[\\d.e+-]+)$`, 'm'));
    }
    expect(text).toContain('# TYPE edge_routing_generations_total counter');
  });

  test("each scrape reads the engine's routing status; done events count generations by policy", async () => {
    const metrics = new EdgeMetrics();
    let status: RoutingStatus = { cut: 0.375, waitBudgetMs: 300, expectedWaitMs: 87.5, tokensLastMinute: 420, overloadedTotal: 3, routedShareRecent: 0.125 };
    metrics.describeRouting({ status: () => status });
    metrics.observe(doneWith(SHARE_AND_WAIT), 'joint');
    metrics.observe(doneWith(SHARE_AND_WAIT), 'joint');
    metrics.observe(doneWith(TOKENS), 'joint');
    let text = await metrics.registry.metrics();
    expect(text).toContain('\nedge_routing_cut 0.375\n');
    expect(text).toContain('\nedge_routing_wait_budget_ms 300\n');
    expect(text).toContain('\nedge_routing_expected_wait_ms 87.5\n');
    expect(text).toContain('\nedge_routing_tokens_per_minute_budget Nan\n');
    expect(text).toContain('\nedge_routing_cloud_tokens_last_minute 420\n');
    expect(text).toContain('\nedge_routing_routed_share_recent 0.125\n');
    expect(text).toContain('\nedge_routing_overloaded_steps_total 3\n');
    expect(text).toContain('\nedge_routing_generations_total{policy="share+wait"} 2\n');
    expect(text).toContain('\nedge_routing_generations_total{policy="tokens"} 1\n');
    status = { cut: null, tokensPerMinuteBudget: 20_000, tokensLastMinute: 19_000, overloadedTotal: 5, routedShareRecent: 0.5 };
    text = await metrics.registry.metrics();
    expect(text).toContain('\nedge_routing_cut Nan\n');
    expect(text).toContain('\nedge_routing_tokens_per_minute_budget 20000\n');
    expect(text).toContain('\nedge_routing_wait_budget_ms Nan\n');
    expect(text).toContain('\nedge_routing_overloaded_steps_total 5\n');
  });
});
