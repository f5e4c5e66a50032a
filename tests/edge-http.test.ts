import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Hono } from 'hono';
import { createEdgeApp } from '../src/edge/http/app.tsx';
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

/** Parses an SSE body into `{event, data}` records. */
async function readSse(res: Response): Promise<{ event: string; data: string }[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.trim())
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((l) => l.startsWith('event:'))?.slice(6).trim() ?? 'message';
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
    for (const id of ['prompt', 'threshold', 'maxNewTokens', 'temperature', 'speculate']) expect(html).toContain(`<label for="${id}"`);
    expect(html).toContain('<option value="off" selected="">off</option>');
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
    const res = await app.request('/runs', form({ prompt: 'Once upon a time', mode: 'joint', threshold: '0.6', maxNewTokens: '20' }));
    expect(res.status).toBe(200);
    const panel = await res.text();
    const id = panel.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;
    expect(panel).toContain('sse-close="end"');
    const events = await readSse(await app.request(`/runs/${id}/events`));
    const tokens = events.filter((e) => e.event === 'token');
    expect(tokens.length).toBe(20);
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

  test('POST /compare starts small_only and joint panels', async () => {
    const html = await (await app.request('/compare', form({ prompt: 'The cat', threshold: '0.5', maxNewTokens: '5' }))).text();
    const ids = [...html.matchAll(/\/runs\/([0-9a-f-]+)\/events/g)].map((m) => m[1]!);
    expect(ids).toHaveLength(2);
    expect(html).toContain('small_only (edge alone)');
    const first = await readSse(await app.request(`/runs/${ids[0]}/events`));
    expect(first.filter((e) => e.event === 'token').every((e) => e.data.includes('tok-slm'))).toBe(true);
    await readSse(await app.request(`/runs/${ids[1]}/events`));
    expect(edge.runtime.activeCount).toBe(0);
  });

  test('Stop before the stream opens releases the slot', async () => {
    const panel = await (await app.request('/runs', form({ prompt: 'Hi', maxNewTokens: '5' }))).text();
    const id = panel.match(/\/runs\/([0-9a-f-]+)\/events/)![1]!;
    expect(edge.runtime.activeCount).toBe(1);
    expect((await app.request(`/runs/${id}/stop`, { method: 'POST' })).status).toBe(204);
    expect(edge.runtime.activeCount).toBe(0);
    expect((await app.request(`/runs/${id}/stop`, { method: 'POST' })).status).toBe(404);
  });
});

describe('validation errors are 4xx with the message in the page', () => {
  const cases: [Record<string, string>, number, string][] = [
    [{ prompt: '' }, 400, 'prompt must not be empty'],
    [{ prompt: 'x', threshold: '2' }, 400, 'threshold must be in [0, 1], got &quot;2&quot;'],
    [{ prompt: 'x', threshold: 'NaN' }, 400, 'threshold must be a number'],
    [{ prompt: 'x', mode: 'turbo' }, 400, 'mode must be one of joint, small_only, llm_only'],
    [{ prompt: 'x', maxNewTokens: '0' }, 400, 'max_new_tokens must be an integer in [1, 1024]'],
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
    const api = await app.request('/api/generate', { method: 'POST', body: JSON.stringify({ prompt: 'x'.repeat(100_000) }) });
    expect(api.status).toBe(413);
    expect(await api.json()).toEqual({ error: { code: 'RESOURCE_EXHAUSTED', message: 'request body is larger than 65536 bytes' } });
  });

  test('too many concurrent generations: 429 with a message', async () => {
    const a = await app.request('/runs', form({ prompt: 'a' }));
    const b = await app.request('/runs', form({ prompt: 'b' }));
    const c = await app.request('/runs', form({ prompt: 'c' }));
    expect([a.status, b.status, c.status]).toEqual([200, 200, 429]);
    expect(await c.text()).toContain('too many generations at once (limit 2)');
    for (const res of [a, b]) {
      const id = (await res.text()).match(/\/runs\/([0-9a-f-]+)\/events/)![1]!;
      await app.request(`/runs/${id}/stop`, { method: 'POST' });
    }
    expect(edge.runtime.activeCount).toBe(0);
  });
});

describe('speculation setting', () => {
  test('off by default on the page: the metrics panel says nothing was decoded ahead', async () => {
    const panel = await (await app.request('/runs', form({ prompt: 'Once upon a time', threshold: '0.9', maxNewTokens: '10' }))).text();
    const id = panel.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;
    const events = await readSse(await app.request(`/runs/${id}/events`));
    const metrics = events.find((e) => e.event === 'metrics')!.data;
    expect(metrics).toContain('Decoded ahead while waiting (hit rate, time saved, steps wasted)</dt><dd data-metric="speculation">none</dd>');
  });

  test('the API reports speculation in the final metrics and refuses a value that is not a boolean', async () => {
    const res = await app.request('/api/generate', { method: 'POST', body: JSON.stringify({ prompt: 'Once upon a time', threshold: 0.9, maxNewTokens: 10, speculate: false }) });
    const done = JSON.parse((await readSse(res)).at(-1)!.data);
    expect(done.metrics).toMatchObject({ speculated: 0, speculationHits: 0, hitRate: 0, wastedSteps: 0, savedMs: 0 });
    const bad = await app.request('/api/generate', { method: 'POST', body: JSON.stringify({ prompt: 'x', speculate: 'sometimes' }) });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { code: 'INVALID_ARGUMENT', message: 'speculate must be true or false, got "sometimes"' } });
  });
});

describe('JSON API', () => {
  test('POST /api/generate streams token and done events', async () => {
    const res = await app.request('/api/generate', {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Once upon a time', mode: 'small_only', maxNewTokens: 8 }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = await readSse(res);
    expect(events.filter((e) => e.event === 'token')).toHaveLength(8);
    const done = JSON.parse(events.at(-1)!.data);
    expect(done.type).toBe('done');
    expect(done.metrics.tokens).toBe(8);
    expect(done.text).toBe(events.filter((e) => e.event === 'token').map((e) => JSON.parse(e.data).text).join(''));
  });

  test('bad JSON and bad fields are 400 JSON errors', async () => {
    const bad = await app.request('/api/generate', { method: 'POST', body: '{nope', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { code: 'INVALID_ARGUMENT', message: 'request body must be a JSON object' } });
    const field = await app.request('/api/generate', { method: 'POST', body: JSON.stringify({ prompt: 'x', threshold: -1 }) });
    expect(field.status).toBe(400);
    expect(((await field.json()) as { error: { message: string } }).error.message).toContain('threshold must be in [0, 1]');
  });
});

describe('operations', () => {
  test('healthz, readyz and Prometheus metrics', async () => {
    expect(await (await app.request('/healthz')).json()).toEqual({ status: 'ok' });
    expect(((await (await app.request("/readyz")).json()) as { ready: boolean }).ready).toBe(true);
    // prom-client hands out its live values: read the number at once.
    const invalid = async () => (await edge.runtime.metrics.refused.get()).values.find((x) => x.labels.code === 'INVALID_ARGUMENT')?.value ?? 0;
    const before = await invalid();
    expect((await app.request('/api/generate', { method: 'POST', body: JSON.stringify({ prompt: '' }) })).status).toBe(400);
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
    expect((await guarded.request('/', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await guarded.request('/', { headers: { authorization: 'Bearer s3cret' } })).status).toBe(200);
    const viaQuery = await guarded.request('/?token=s3cret');
    expect(viaQuery.status).toBe(200);
    const cookie = viaQuery.headers.get('set-cookie')!;
    expect(cookie).toContain('HttpOnly');
    expect((await guarded.request('/api/info', { headers: { cookie: cookie.split(';')[0]! } })).status).toBe(200);
    expect((await guarded.request('/healthz')).status).toBe(200);
  });
});
