/**
 * Every name on Object.prototype (`constructor`, `__proto__`, `toString`, ...) as a key, a field, a path
 * segment and a query name, sent to every endpoint of the edge's HTTP server (issue 45, item 2): a body
 * key named like an object property once reached the prototype through `neutral[key]` and answered 500.
 * Each is a 4xx with a message (unknown fields by name), never a 500, and the edge serves a normal
 * generation afterwards.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { basename } from 'node:path';
import type { Hono } from 'hono';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

const NAMES = Object.getOwnPropertyNames(Object.prototype);

let edge: TestEdge;
let app: Hono;
let model: string;

beforeAll(async () => {
  edge = await startTestEdge({ maxConcurrent: 2 });
  app = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024 });
  model = basename(edge.runtime.engine.edgeModel.pack.dir);
});
afterAll(() => edge.release());

/** A JSON object with `name` as an own key, `__proto__` included (an object literal would set the prototype). */
function withKey(base: Record<string, unknown>, name: string, value: unknown = 1): string {
  return `${JSON.stringify(base).slice(0, -1)},${JSON.stringify(name)}:${JSON.stringify(value)}}`;
}

const post = (path: string, body: string, type = 'application/json') => app.request(path, { method: 'POST', body, headers: { 'content-type': type } });

/** Every way a request can carry a name, each with the status a correct edge gives it. */
function requestsFor(name: string): [string, () => Promise<Response> | Response, number][] {
  const chat = { model, messages: [{ role: 'user', content: 'hi' }] };
  const completion = { model, prompt: 'x' };
  const encoded = encodeURIComponent(name);
  return [
    ['api: top-level key', () => post('/api/generate', withKey({ prompt: 'x' }, name)), 400],
    ['api: form field', () => post('/api/generate', `prompt=x&${encoded}=1`, 'application/x-www-form-urlencoded'), 400],
    ['page: form field', () => post('/runs', `prompt=x&${encoded}=1`, 'application/x-www-form-urlencoded'), 400],
    ['compare: form field', () => post('/compare', `prompt=x&${encoded}=1`, 'application/x-www-form-urlencoded'), 400],
    ['completions: top-level key', () => post('/v1/completions', withKey(completion, name)), 400],
    ['completions: key set to null', () => post('/v1/completions', withKey(completion, name, null)), 200],
    ['chat: top-level key', () => post('/v1/chat/completions', withKey(chat, name)), 400],
    [
      'chat: stream_options key',
      () => post('/v1/chat/completions', JSON.stringify({ ...chat, stream: true }).slice(0, -1) + `,"stream_options":${withKey({}, name).replace('{,', '{')}}`),
      400,
    ],
    [
      'chat: message key',
      () => post('/v1/chat/completions', JSON.stringify({ model, messages: [JSON.parse(withKey({ role: 'user', content: 'hi' }, name))] })),
      400,
    ],
    ['chat: role named so', () => post('/v1/chat/completions', JSON.stringify({ model, messages: [{ role: name, content: 'hi' }] })), 400],
    ['models: id named so', () => app.request(`/v1/models/${encoded}`), 404],
    ['page: run id named so (events)', () => app.request(`/runs/${encoded}/events`), 200],
    ['page: run id named so (stop)', () => app.request(`/runs/${encoded}/stop`, { method: 'POST' }), 404],
    ['page: query name', () => app.request(`/?${encoded}=1`), 200],
  ];
}

test('every Object.prototype name, in every place a request can carry one, gets its 4xx (or is ignored where names are free), never a 500', async () => {
  expect(NAMES).toContain('__proto__');
  expect(NAMES).toContain('constructor');
  const seen: { name: string; where: string; status: number; message: string }[] = [];
  const wanted: typeof seen = [];
  for (const name of NAMES) {
    for (const [where, send, status] of requestsFor(name)) {
      const res = await send();
      const text = await res.text();
      // The refusal names the problem: the JSON error's message, or the page fragment's alert.
      const message =
        status >= 400 && res.status === status
          ? text.includes(name) || /must be one of|unknown field|not supported|no such|does not exist|no running/.test(text)
            ? 'says why'
            : text.slice(0, 200)
          : '';
      seen.push({ name, where, status: res.status, message });
      wanted.push({ name, where, status, message: status >= 400 ? 'says why' : '' });
    }
  }
  expect(seen).toEqual(wanted);
  expect(seen.filter((s) => s.status >= 500)).toEqual([]);

  const res = await post('/api/generate', JSON.stringify({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: 3 }));
  expect([...(await res.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['token', 'token', 'token', 'done']);
}, 60_000);

test('a bug that still answers 500 writes a log line, on the page and JSON API and on the OpenAI API', async () => {
  const lines: { msg: string; fields?: Record<string, unknown> }[] = [];
  const log = { debug() {}, info() {}, warn() {}, error: (msg: string, fields?: Record<string, unknown>) => lines.push({ msg, fields }) };
  const logged = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024, log });
  const start = edge.runtime.start;
  // A bug stands in: the runtime throws a plain TypeError, which no parser produces on purpose.
  edge.runtime.start = () => {
    throw new TypeError('a bug');
  };
  try {
    const api = await logged.request('/api/generate', {
      method: 'POST',
      body: JSON.stringify({ prompt: 'x' }),
      headers: { 'content-type': 'application/json' },
    });
    const openai = await logged.request('/v1/completions', {
      method: 'POST',
      body: JSON.stringify({ model, prompt: 'x' }),
      headers: { 'content-type': 'application/json' },
    });
    expect([api.status, openai.status]).toEqual([500, 500]);
  } finally {
    edge.runtime.start = start;
  }
  expect(lines).toEqual([
    { msg: 'internal error', fields: { method: 'POST', path: '/api/generate', error: 'a bug' } },
    { msg: 'internal error', fields: { method: 'POST', path: '/v1/completions', error: 'a bug' } },
  ]);
});
