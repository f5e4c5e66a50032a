import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as protoLoader from '@grpc/proto-loader';
import type { Hono } from 'hono';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { PROTO_LOADER_OPTIONS } from '../src/shared/grpc/proto.ts';
import { DEMO } from '../src/shared/paths.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

let edge: TestEdge;
let app: Hono;

beforeAll(async () => {
  edge = await startTestEdge({ maxConcurrent: 2 });
  app = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024 });
});
afterAll(async () => {
  await edge.release();
});

function form(fields: Record<string, string>): RequestInit {
  return { method: 'POST', body: new URLSearchParams(fields), headers: { 'content-type': 'application/x-www-form-urlencoded' } };
}

function json(body: unknown): RequestInit {
  return { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
}

/** Every key of a parsed JSON value, as dotted paths (`metrics.tbt_mean_ms`). */
function keyPaths(value: unknown, prefix = ''): string[] {
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, inner]) => [`${prefix}${key}`, ...keyPaths(inner, `${prefix}${key}.`)]);
}

/** The field names of a message of proto/edge_generator.proto, as the .proto spells them. */
function protoFields(message: string): string[] {
  const definition = protoLoader.loadSync('edge_generator.proto', { ...PROTO_LOADER_OPTIONS, keepCase: true });
  // A message's `type` is its DescriptorProto.
  const descriptor = definition[`tokenrouter.edge.v1.${message}`]!.type as { field: { name: string }[] };
  return descriptor.field.map((field) => field.name);
}

const runId = (panel: string) => panel.match(/\/runs\/([0-9a-f-]+)\/events/)![1]!;

/** Parses an SSE body into `{event, data}` records. */
async function readSse(res: Response): Promise<{ event: string; data: string }[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.trim())
    .map((block) => {
      const lines = block.split('\n');
      const event =
        lines
          .find((l) => l.startsWith('event:'))
          ?.slice(6)
          .trim() ?? 'message';
      const data = lines
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      return { event, data };
    });
}

describe('pages', () => {
  test('the generate page has labelled controls and local htmx assets', async () => {
    const res = await app.request('/');
    expect(res.status).toBe(200);
    const html = await res.text();
    for (const id of ['prompt', 'threshold', 'max_new_tokens', 'temperature', 'speculate']) expect(html).toContain(`<label for="${id}"`);
    // The test edge's speculate setting is off; the page preselects what a request without the field gets.
    expect(html).toMatch(/<option value="off" selected="">\s*off\s*<\/option>\s*<option value="on">\s*on\s*<\/option>/);
    const settings = edge.runtime.engine.speculation;
    edge.runtime.engine.speculation = { byDefault: true };
    try {
      const on = await (await createEdgeApp(edge.runtime, { maxBodyBytes: 1024 }).request('/')).text();
      expect(on).toMatch(/<option value="off">\s*off\s*<\/option>\s*<option value="on" selected="">\s*on\s*<\/option>/);
      edge.runtime.engine.speculation = { byDefault: 'auto' };
      const auto = await (await createEdgeApp(edge.runtime, { maxBodyBytes: 1024 }).request('/')).text();
      expect(auto).toMatch(/<option value="auto" selected="">\s*auto \(where it pays\)\s*<\/option>\s*<option value="off">/);
    } finally {
      edge.runtime.engine.speculation = settings;
    }
    expect(html).toContain('name="mode" value="small_only"');
    expect(html).toContain('name="mode" value="llm_only"');
    expect(html).toContain('<output id="threshold-value" for="threshold">0.50</output>');
    expect(html).toContain('src="/assets/htmx.min.js"');
    expect(html).not.toMatch(/https?:\/\/(unpkg|cdn)/);
    const htmx = await app.request('/assets/htmx.min.js');
    expect(htmx.status).toBe(200);
    expect(await htmx.text()).toContain('htmx');
    expect((await app.request('/assets/sse.js')).status).toBe(200);
    expect((await app.request('/assets/nope.js')).status).toBe(404);
  });

  test('assets come from a fixed list: prototype names and unknown files are 404', async () => {
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'nope.js', '..%2Fpackage.json']) {
      const res = await app.request(`/assets/${name}`);
      expect([name, res.status]).toEqual([name, 404]);
    }
    const icon = await app.request('/assets/favicon.svg');
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/svg+xml');
    expect(await icon.text()).toStartWith('<svg');
    expect(await (await app.request('/')).text()).toContain('<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml"/>');
  });

  test('/api/info and done events name packs by their folder, not their path on the device', async () => {
    const info = (await (await app.request('/api/info')).json()) as { slm: string; router: string };
    expect(info.slm).toBe('stories260k-distilled-1l');
    expect(info.router).toBe('builtin:top1-probability');
    const trained = await startTestEdge({ router: 'trained' });
    try {
      const trainedApp = createEdgeApp(trained.runtime, { maxBodyBytes: 1024 });
      expect(((await (await trainedApp.request('/api/info')).json()) as { router: string }).router).toBe('onnx:router-stories260k-distilled-1l');
      const events = await readSse(await trainedApp.request('/api/generate', json({ prompt: 'Hi', mode: 'small_only', max_new_tokens: 1 })));
      expect(JSON.parse(events.at(-1)!.data).router).toBe('onnx:router-stories260k-distilled-1l');
    } finally {
      await trained.release();
    }
  });

  test('the compare page posts to /compare', async () => {
    const html = await (await app.request('/compare')).text();
    expect(html).toContain('hx-post="/compare"');
  });

  test('cloud state fragment', async () => {
    expect(await (await app.request('/fragments/cloud-state')).text()).toBe('<span class="cloud-ready">cloud: ready</span>');
  });
});

describe('a generation through the page fragments', () => {
  test('POST /runs returns a run panel; its stream sends escaped token spans, metrics, then end', async () => {
    const res = await app.request('/runs', form({ prompt: 'Once upon a time', mode: 'joint', threshold: '0.6', max_new_tokens: '20' }));
    expect(res.status).toBe(200);
    const panel = await res.text();
    const id = panel.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;
    expect(panel).toContain('sse-close="end"');
    const events = await readSse(await app.request(`/runs/${id}/events`));
    const tokens = events.filter((e) => e.event === 'token');
    expect(tokens.length).toBe(20);
    const bars = events.filter((e) => e.event === 'heat').map((e) => e.data.match(/data-index="(\d+)"/)![1]);
    expect(bars).toEqual([...Array(20).keys()].map(String));
    const red = tokens.filter((t) => t.data.includes('tok-llm')).length;
    expect(red).toBeGreaterThan(0);
    const metrics = events.find((e) => e.event === 'metrics')!.data;
    expect(metrics).toContain(`data-metric="routed" data-value="${red}"`);
    expect(events.at(-1)!.event).toBe('end');
    expect(events.at(-1)!.data).toContain('data-finish="length"');
    expect(edge.runtime.activeCount).toBe(0);
    // The stream can be taken once; a reconnect gets a clean end.
    const again = await readSse(await app.request(`/runs/${id}/events`));
    expect(again).toHaveLength(1);
    expect(again[0]!.data).toContain('no longer running');
  });

  test('POST /compare starts small_only, then joint once small_only is over', async () => {
    const html = await (await app.request('/compare', form({ prompt: 'The cat', threshold: '0.5', max_new_tokens: '5' }))).text();
    const ids = [...html.matchAll(/\/runs\/([0-9a-f-]+)\/events/g)].map((m) => m[1]!);
    expect(ids).toHaveLength(2);
    expect(html).toContain('small_only (edge alone)');
    expect(html).toContain('waits for small_only to finish, so neither&#39;s timings include the other&#39;s load');
    // The joint side's stream opens first (as a browser may) and waits; it starts when small_only ends.
    const jointResponse = app.request(`/runs/${ids[1]}/events`);
    await Bun.sleep(50);
    expect(edge.runtime.activeCount).toBe(0);
    const first = await readSse(await app.request(`/runs/${ids[0]}/events`));
    expect(first.filter((e) => e.event === 'token').every((e) => e.data.includes('tok-slm'))).toBe(true);
    const second = await readSse(await jointResponse);
    // Each token comes with its bar in the heat line.
    expect(second.map((e) => e.event)).toEqual(['status', ...Array(5).fill(['token', 'heat']).flat(), 'metrics', 'end']);
    expect(edge.runtime.idle).toBe(true);
  });

  test('Stop on the queued side of a compare ends it without running it', async () => {
    const html = await (await app.request('/compare', form({ prompt: 'The cat', max_new_tokens: '5' }))).text();
    const ids = [...html.matchAll(/\/runs\/([0-9a-f-]+)\/events/g)].map((m) => m[1]!);
    const jointResponse = app.request(`/runs/${ids[1]}/events`);
    await Bun.sleep(20);
    expect((await app.request(`/runs/${ids[1]}/stop`, { method: 'POST' })).status).toBe(204);
    const joint = await readSse(await jointResponse);
    expect(joint.map((e) => e.event)).toEqual(['end']);
    expect(joint[0]!.data).toContain('data-finish="cancelled"');
    expect((await app.request(`/runs/${ids[0]}/stop`, { method: 'POST' })).status).toBe(204);
    expect(edge.runtime.idle).toBe(true);
  });

  test('the run title shows τ only in joint mode; llm_only shows the cloud time per token instead of the edge TBT', async () => {
    const titles: Record<string, string> = {};
    for (const mode of ['joint', 'small_only', 'llm_only']) {
      const panel = await (await app.request('/runs', form({ prompt: 'Hi', mode, threshold: '0.7', max_new_tokens: '3' }))).text();
      titles[mode] = panel.match(/<h2>(.*?)<\/h2>/)![1]!;
      const events = await readSse(await app.request(`/runs/${runId(panel)}/events`));
      const metrics = events.find((e) => e.event === 'metrics')!.data;
      if (mode === 'llm_only') {
        expect(metrics).toContain('<dt>Time per token (cloud round trip, mean)</dt>');
        expect(metrics).not.toContain('Time between tokens (edge');
      } else {
        expect(metrics).toContain('<dt>Time between tokens (edge, mean / p50 / p95)</dt>');
      }
    }
    expect(titles).toEqual({ joint: 'joint<small class="legend"> τ=0.70</small>', small_only: 'small_only', llm_only: 'llm_only' });
  });

  test('a run holds no slot before its stream opens; Stop drops it', async () => {
    const panel = await (await app.request('/runs', form({ prompt: 'Hi', max_new_tokens: '5' }))).text();
    const id = panel.match(/\/runs\/([0-9a-f-]+)\/events/)![1]!;
    expect(edge.runtime.activeCount).toBe(0);
    expect(edge.runtime.idle).toBe(false);
    expect((await app.request(`/runs/${id}/stop`, { method: 'POST' })).status).toBe(204);
    expect(edge.runtime.idle).toBe(true);
    expect((await app.request(`/runs/${id}/stop`, { method: 'POST' })).status).toBe(404);
  });

  test('eight posts that never open their stream block nobody: the API is served, and each post still runs once opened', async () => {
    const panels = [];
    for (let i = 0; i < 8; i++) {
      const res = await app.request('/runs', form({ prompt: `Run ${i}`, mode: 'small_only', max_new_tokens: '2' }));
      expect(res.status).toBe(200);
      panels.push(await res.text());
    }
    expect(edge.runtime.activeCount).toBe(0);
    const api = await app.request('/api/generate', json({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: 3 }));
    expect(api.status).toBe(200);
    expect((await readSse(api)).map((e) => e.event)).toEqual(['token', 'token', 'token', 'done']);
    const first = await readSse(await app.request(`/runs/${runId(panels[0]!)}/events`));
    expect(first.map((e) => e.event)).toEqual(['token', 'heat', 'token', 'heat', 'metrics', 'end']);
    for (const panel of panels.slice(1)) expect((await app.request(`/runs/${runId(panel)}/stop`, { method: 'POST' })).status).toBe(204);
    expect(edge.runtime.idle).toBe(true);
  });
});

describe('validation errors are 4xx with the message in the page', () => {
  const cases: [Record<string, string>, number, string][] = [
    [{ prompt: '' }, 400, 'prompt must not be empty'],
    [{ prompt: 'x', threshold: '2' }, 400, 'threshold must be in [0, 1], got 2'],
    [{ prompt: 'x', threshold: 'NaN' }, 400, 'threshold must be a number'],
    [{ prompt: 'x', mode: 'turbo' }, 400, 'mode must be one of joint, small_only, llm_only'],
    [{ prompt: 'x', max_new_tokens: '0' }, 400, 'max_new_tokens must be an integer in [1, 1024]'],
    [{ prompt: 'x', temperature: '-3' }, 400, 'temperature must be in [0, 5]'],
  ];
  for (const [fields, status, message] of cases) {
    test(JSON.stringify(fields), async () => {
      const res = await app.request('/runs', form(fields));
      expect(res.status).toBe(status);
      const html = await res.text();
      expect(html).toContain('role="alert"');
      expect(html).toContain(message);
    });
  }

  test('a body above the limit is refused before it is read', async () => {
    const res = await app.request('/runs', form({ prompt: 'x'.repeat(100_000) }));
    expect(res.status).toBe(413);
    expect(await res.text()).toContain('request body is larger than 65536 bytes');
    const api = await app.request('/api/generate', json({ prompt: 'x'.repeat(100_000) }));
    expect(api.status).toBe(413);
    expect(await api.json()).toEqual({ error: { code: 'RESOURCE_EXHAUSTED', message: 'request body is larger than 65536 bytes' } });
  });
});

describe('speculation setting', () => {
  test('off by default on the page: the metrics panel says nothing was decoded ahead', async () => {
    const panel = await (await app.request('/runs', form({ prompt: 'Once upon a time', threshold: '0.9', max_new_tokens: '10' }))).text();
    const id = panel.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;
    const events = await readSse(await app.request(`/runs/${id}/events`));
    const metrics = events.find((e) => e.event === 'metrics')!.data;
    expect(metrics).toContain('Decoded ahead while waiting (hit rate, time saved, steps wasted)</dt><dd data-metric="speculation">none</dd>');
    expect(metrics).toContain('<dd data-metric="speculate">off</dd>');
  });

  test('auto from the page: the metrics panel shows what it decided and from which figures', async () => {
    const panel = await (await app.request('/runs', form({ prompt: 'Once upon a time', threshold: '0.95', max_new_tokens: '16', speculate: 'auto' }))).text();
    const id = panel.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;
    const events = await readSse(await app.request(`/runs/${id}/events`));
    const metrics = events.find((e) => e.event === 'metrics')!.data;
    expect(metrics).toMatch(
      /<dd data-metric="speculate">auto: \d+ \/ [1-9]\d*; hit rate \d+%, round trip (\?|[\d.]+ ms), edge step (\?|[\d.]+ ms): saves [\d.]+ ms, costs [\d.]+ ms<\/dd>/,
    );
  });

  test('the API reports speculation in the final metrics and refuses a value that is not a boolean', async () => {
    const res = await app.request('/api/generate', json({ prompt: 'Once upon a time', threshold: 0.9, max_new_tokens: 10, speculate: false }));
    const done = JSON.parse((await readSse(res)).at(-1)!.data);
    expect(done.metrics).toMatchObject({ speculated: 0, speculation_hits: 0, hit_rate: 0, wasted_steps: 0, saved_ms: 0 });
    const bad = await app.request('/api/generate', json({ prompt: 'x', speculate: 'sometimes' }));
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { code: 'INVALID_ARGUMENT', message: 'speculate must be true or false, got "sometimes"' } });
  });
});

describe('JSON API', () => {
  test('POST /api/generate streams token and done events', async () => {
    const res = await app.request('/api/generate', {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: 8 }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = await readSse(res);
    expect(events.filter((e) => e.event === 'token')).toHaveLength(8);
    const done = JSON.parse(events.at(-1)!.data);
    expect(done.type).toBe('done');
    expect(done.metrics.tokens).toBe(8);
    expect(done.text).toBe(
      events
        .filter((e) => e.event === 'token')
        .map((e) => JSON.parse(e.data).text)
        .join(''),
    );
  });

  test('event fields are snake_case, named as in proto/edge_generator.proto, at every depth; /api/info too', async () => {
    const res = await app.request('/api/generate', json({ prompt: 'Once upon a time', mode: 'joint', threshold: 0.9, max_new_tokens: 6 }));
    const events = (await readSse(res)).map((e) => ({ event: e.event, data: JSON.parse(e.data) as Record<string, unknown> }));
    const [token, done] = [events[0]!.data, events.at(-1)!.data];
    expect(events.map((e) => e.event)).toEqual(['token', 'token', 'token', 'token', 'token', 'token', 'done']);
    const badNames = events.flatMap((e) => keyPaths(e.data)).filter((path) => !/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/.test(path));
    expect(badNames).toEqual([]);
    // The proto's fields (a token's cloud_error is there only for a fallback, the metrics' constraint only with one); the JSON may carry more.
    expect(Object.keys(token)).toEqual(expect.arrayContaining(protoFields('Token').filter((f) => f !== 'cloud_error')));
    expect(Object.keys(token.timings as object).sort()).toEqual(protoFields('TokenTimings').sort());
    expect(Object.keys(done)).toEqual(expect.arrayContaining(protoFields('Done')));
    expect(Object.keys(done.metrics as object)).toEqual(expect.arrayContaining(protoFields('Metrics').filter((f) => f !== 'constraint')));
    const promptTokens = edge.runtime.engine.tokenizer.encode('Once upon a time', { addBos: true, parseSpecialTokens: false }).length;
    expect(done).toMatchObject({ type: 'done', finish_reason: 'length', metrics: { prompt_tokens: promptTokens, tokens: 6 } });
    expect(typeof done.request_id).toBe('string');
    const info = (await (await app.request('/api/info')).json()) as { limits: object };
    expect(info.limits).toEqual({ max_prompt_chars: 16_384, max_new_tokens: 1024, max_route_span: 16, max_concurrent: 2 });
  });

  test('bad JSON and bad fields are 400 JSON errors', async () => {
    const bad = await app.request('/api/generate', { method: 'POST', body: '{nope', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { code: 'INVALID_ARGUMENT', message: 'request body must be a JSON object' } });
    const field = await app.request('/api/generate', json({ prompt: 'x', threshold: -1 }));
    expect(field.status).toBe(400);
    expect(((await field.json()) as { error: { message: string } }).error.message).toContain('threshold must be in [0, 1]');
  });
});

describe('operations', () => {
  test('healthz, readyz and Prometheus metrics', async () => {
    expect(await (await app.request('/healthz')).json()).toEqual({ status: 'ok' });
    expect(((await (await app.request('/readyz')).json()) as { ready: boolean }).ready).toBe(true);
    // prom-client hands out its live values: read the number at once.
    const invalid = async () => (await edge.runtime.metrics.refused.get()).values.find((x) => x.labels.code === 'INVALID_ARGUMENT')?.value ?? 0;
    const before = await invalid();
    expect((await app.request('/api/generate', json({ prompt: '' }))).status).toBe(400);
    expect(await invalid()).toBe(before + 1);
    const text = await (await app.request('/metrics')).text();
    expect(text).toMatch(/edge_generations_total\{mode="joint",finish="(length|eos|stop)"\} [1-9]\d*/);
    expect(text).toMatch(/edge_refused_total\{code="INVALID_ARGUMENT"\} [1-9]\d*/);
    expect(text).toMatch(/edge_tokens_total\{source="slm"\} \d+/);
    expect(text).toMatch(/edge_routed_tokens_total [1-9]\d*/);
    expect(text).toContain('edge_step_seconds_bucket');
    expect(text).toContain('edge_cloud_round_trip_seconds_bucket');
  });

  test('with an access token, requests without it are 401 and health stays open', async () => {
    const guarded = createEdgeApp(edge.runtime, { maxBodyBytes: 1024, accessToken: 's3cret' });
    expect((await guarded.request('/')).status).toBe(401);
    expect((await guarded.request('/api/info')).status).toBe(401);
    expect((await guarded.request('/metrics')).status).toBe(401);
    expect((await guarded.request('/', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await guarded.request('/', { headers: { authorization: 'Basic s3cret' } })).status).toBe(401);
    // RFC 7235: the scheme is case-insensitive.
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      expect((await guarded.request('/', { headers: { authorization: `${scheme} s3cret` } })).status).toBe(200);
    }
    expect((await guarded.request('/metrics', { headers: { authorization: 'bearer s3cret' } })).status).toBe(200);
    const viaQuery = await guarded.request('/?token=s3cret');
    expect(viaQuery.status).toBe(200);
    const cookie = viaQuery.headers.get('set-cookie')!;
    expect(cookie).toContain('HttpOnly');
    expect((await guarded.request('/api/info', { headers: { cookie: cookie.split(';')[0]! } })).status).toBe(200);
    expect((await guarded.request('/healthz')).status).toBe(200);
    expect((await guarded.request('/assets/app.css')).status).toBe(200);
  });

  test('?token= replaces a stale cookie', async () => {
    const guarded = createEdgeApp(edge.runtime, { maxBodyBytes: 1024, accessToken: 'new-token' });
    const stale = { cookie: 'edge_token=old-token' };
    expect((await guarded.request('/', { headers: stale })).status).toBe(401);
    const again = await guarded.request('/?token=new-token', { headers: stale });
    expect(again.status).toBe(200);
    expect(again.headers.get('set-cookie')).toStartWith('edge_token=new-token;');
    // A wrong ?token= is refused even beside a right cookie, and sets nothing.
    const wrong = await guarded.request('/?token=nope', { headers: { cookie: 'edge_token=new-token' } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
  });

  test('a browser without the token gets a styled page with a token field; the API and fragments get their own 401', async () => {
    const guarded = createEdgeApp(edge.runtime, { maxBodyBytes: 1024, accessToken: 's3cret' });
    const page = await guarded.request('/compare');
    expect(page.status).toBe(401);
    expect(page.headers.get('www-authenticate')).toBe('Bearer realm="edge"');
    const html = await page.text();
    expect(html).toStartWith('<!DOCTYPE html>');
    expect(html).toContain('<link rel="stylesheet" href="/assets/app.css"/>');
    expect(html).toContain('<form class="controls token-form" method="get" action="/compare">');
    expect(html).toContain('<input id="token" name="token" type="password"');
    expect(html).not.toContain('/fragments/cloud-state');
    expect(html).not.toContain('That token is wrong; try again.');
    expect(await (await guarded.request('/?token=nope')).text()).toContain('That token is wrong; try again.');
    const api = await guarded.request('/api/info');
    expect(await api.json()).toEqual({
      error: { code: 'UNAUTHENTICATED', message: 'this edge requires an access token (Authorization: Bearer, or open the page with ?token=...)' },
    });
    const fragment = await guarded.request('/fragments/cloud-state', { headers: { 'hx-request': 'true' } });
    expect(fragment.status).toBe(401);
    expect(await fragment.text()).toStartWith('<div class="error" role="alert">');
  });
});

describe('with the trained demo router', () => {
  let trained: TestEdge;
  let trainedApp: Hono;
  beforeAll(async () => {
    trained = await startTestEdge({ maxConcurrent: 2, router: 'trained' });
    trainedApp = createEdgeApp(trained.runtime, { maxBodyBytes: 64 * 1024 });
  });
  afterAll(async () => {
    await trained.release();
  });

  test("the page's τ and a request without one both take router.json's default_threshold (DEMO.routerThreshold)", async () => {
    const tau = DEMO.routerThreshold;
    expect(trained.runtime.engine.router.info.defaultThreshold).toBe(tau);
    const html = await (await trainedApp.request('/')).text();
    expect(html).toContain(`<output id="threshold-value" for="threshold">${tau.toFixed(2)}</output>`);
    expect(html).toMatch(new RegExp(`id="threshold"[^>]*value="${tau}"`));
    const panel = await (await trainedApp.request('/runs', form({ prompt: 'Once upon a time', mode: 'joint', max_new_tokens: '4' }))).text();
    expect(panel).toContain(`τ=${tau}`);
    const id = panel.match(/id="run-([0-9a-f-]+)"/)![1]!;
    expect((await trainedApp.request(`/runs/${id}/stop`, { method: 'POST' })).status).toBe(204);
  });
});
