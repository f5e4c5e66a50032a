/**
 * What real generations report about their routing at each surface, on the demo packs with the cloud
 * pack in process: the JSON API's done event (`metrics.budget`), gRPC Generate's done message
 * (`Metrics.budget`), OpenAI's `usage.routing`, the page's metrics panel and Prometheus's count of
 * generations by policy. The policy is `threshold` without a budget, `share` with route_share, and
 * `share+wait` with route_wait_ms beside it; the budgets come back as given, and the realized share is a
 * share. The cut itself is the controller's (routing-budget.ts): here it only has to be a score.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Hono } from 'hono';
import { EdgeGrpcServer } from '../src/edge/grpc/edge-grpc-server.ts';
import { EdgeGeneratorClient, type EdgeGeneratorClientType, type GenerateEvent__Output, type GenerateRequest } from '../src/edge/grpc/edge-proto.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { PROTO_LOADER_OPTIONS } from '../src/shared/grpc/proto.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

const PROMPT = 'Once upon a time';
/** The demo edge pack's name, as /v1/models lists it. */
const MODEL = 'stories260k-distilled-1l';

let edge: TestEdge;
let app: Hono;

beforeAll(async () => {
  // The edge's own default: what a request naming neither τ nor a budget gets.
  edge = await startTestEdge({ defaultBudget: { routeShare: 0.1 } });
  app = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024 });
});
afterAll(async () => {
  await edge.release();
});

/** The report's checks every surface shares, on its snake_case form. */
function expectReport(report: Record<string, unknown>, policy: string, budgets: Record<string, number>): void {
  expect(report).toMatchObject({ policy, ...budgets });
  const { cut, realized_share: share, decided, routed_positions: routed } = report as Record<string, number>;
  expect(cut).toBeGreaterThanOrEqual(0);
  expect(cut).toBeLessThanOrEqual(1);
  expect(share).toBeGreaterThanOrEqual(0);
  expect(share).toBeLessThanOrEqual(1);
  expect(routed).toBeLessThanOrEqual(decided);
  expect(share).toBeCloseTo(decided ? routed / decided : 0, 6);
}

async function lastSseData(res: Response): Promise<Record<string, unknown>> {
  const blocks = (await res.text()).split('\n\n').filter((block) => block.trim());
  const data = blocks
    .at(-1)!
    .split('\n')
    .find((line) => line.startsWith('data:'))!
    .slice(5);
  return JSON.parse(data) as Record<string, unknown>;
}

async function jsonBudget(body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await app.request('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ prompt: PROMPT, max_new_tokens: 16, ...body }),
    headers: { 'content-type': 'application/json' },
  });
  expect(res.status).toBe(200);
  const done = await lastSseData(res);
  expect(done.type).toBe('done');
  return (done.metrics as Record<string, unknown>).budget as Record<string, unknown>;
}

describe('JSON API done event', () => {
  test('threshold without a budget: the cut is τ', async () => {
    const report = await jsonBudget({ threshold: 0.7 });
    expectReport(report, 'threshold', { threshold: 0.7, cut: 0.7, mean_cut: 0.7 });
    expect(report.share).toBeUndefined();
  });

  test('share with route_share, share+wait with route_wait_ms beside it; the fields of the proto message', async () => {
    expectReport(await jsonBudget({ route_share: 0.2 }), 'share', { share: 0.2 });
    const both = await jsonBudget({ route_share: 0.2, route_wait_ms: 300 });
    expectReport(both, 'share+wait', { share: 0.2, wait_ms: 300 });
    const definition = protoLoader.loadSync('edge_generator.proto', { ...PROTO_LOADER_OPTIONS, keepCase: true });
    // Every field of the proto's RoutingBudget, less those present only with their budget.
    const optional = ['tokens_per_minute', 'tokens_last_minute', 'expected_wait_ms'];
    const fields = (definition['tokenrouter.edge.v1.RoutingBudget']!.type as { field: { name: string }[] }).field.map((f) => f.name);
    expect(Object.keys(both)).toEqual(expect.arrayContaining(fields.filter((name) => !optional.includes(name))));
  });

  test("a request naming nothing gets the edge's --route-share", async () => {
    expectReport(await jsonBudget({}), 'share', { share: 0.1 });
  });
});

describe('gRPC Generate done message', () => {
  let server: EdgeGrpcServer;
  let client: EdgeGeneratorClientType;

  beforeAll(async () => {
    server = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, maxReceiveBytes: 64 * 1024 });
    client = new EdgeGeneratorClient(`127.0.0.1:${await server.start()}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client.close();
    await server.shutdown(1000);
  });

  async function done(request: GenerateRequest) {
    const events: GenerateEvent__Output[] = [];
    const stream = client.Generate(request, { deadline: Date.now() + 60_000 });
    for await (const event of stream) events.push(event as GenerateEvent__Output);
    return events.at(-1)!.done!;
  }

  test('carries the report: share with route_share, the budget exact (a double)', async () => {
    const budget = (await done({ prompt: PROMPT, maxNewTokens: 16, routeShare: 0.2 })).metrics!.budget!;
    expectReport(
      {
        policy: budget.policy,
        share: budget.share,
        cut: budget.cut,
        realized_share: budget.realizedShare,
        decided: budget.decided,
        routed_positions: budget.routedPositions,
      },
      'share',
      { share: 0.2 },
    );
  });
});

describe('OpenAI usage.routing', () => {
  const post = (path: string, body: Record<string, unknown>) =>
    app.request(`/v1/${path}`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, max_tokens: 12, temperature: 0, ...body }),
      headers: { 'content-type': 'application/json' },
    });

  test('a completion with route_share reports policy share and its share', async () => {
    const res = await post('completions', { prompt: PROMPT, route_share: 0.2 });
    expect(res.status).toBe(200);
    const { usage } = (await res.json()) as { usage: { routing: Record<string, unknown> } };
    expectReport(usage.routing, 'share', { share: 0.2 });
  });

  test('a stream with include_usage reports it in its last chunk; routing_threshold alone is threshold', async () => {
    const res = await post('completions', { prompt: PROMPT, routing_threshold: 0.6, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    const chunks = (await res.text())
      .split('\n\n')
      .filter((b) => b.startsWith('data: {'))
      .map((b) => JSON.parse(b.slice(6)) as { usage: { routing: Record<string, unknown> } | null });
    expectReport(chunks.at(-1)!.usage!.routing, 'threshold', { threshold: 0.6, cut: 0.6 });
  });
});

describe('the page and Prometheus', () => {
  test("the metrics panel names the policy and the budget's use", async () => {
    const form = new URLSearchParams({
      prompt: PROMPT,
      threshold: '0.5',
      max_new_tokens: '12',
      route_share: '0.2',
      route_tokens_per_minute: '',
      route_wait_ms: '',
    });
    const panel = await (await app.request('/runs', { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } })).text();
    const id = panel.match(/\/runs\/([0-9a-f-]+)\/events/)![1]!;
    const events = await (await app.request(`/runs/${id}/events`)).text();
    expect(events).toMatch(/<dd data-metric="policy">share: cut [01]\.\d{3} \(mean [01]\.\d{3}\)<\/dd>/);
    expect(events).toMatch(/<dd data-metric="budget">routed \d+\.\d% of positions \(\d+ \/ \d+\), target 20\.0%<\/dd>/);
  });

  test('the generations above are counted by policy', async () => {
    const text = await (await app.request('/metrics')).text();
    expect(text).toMatch(/^edge_routing_generations_total\{policy="threshold"\} [1-9]\d*$/m);
    expect(text).toMatch(/^edge_routing_generations_total\{policy="share"\} [1-9]\d*$/m);
    expect(text).toMatch(/^edge_routing_generations_total\{policy="share\+wait"\} [1-9]\d*$/m);
  });
});
