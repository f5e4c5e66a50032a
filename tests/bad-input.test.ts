/**
 * Bad input against the three servers: the edge's HTTP API, its OpenAI-compatible API and the page
 * (through the Hono app), the edge's gRPC Generate service and the cloud shim's Route service (real
 * servers on loopback), and both gRPC health services. Each server gets its whole matrix in sequence, table-driven (case → status →
 * message), and then a normal request that must succeed: a refusal is specific, carries a message, and leaves the server serving with every slot
 * and session given back.
 *
 * Where a case does not apply: the edge's services have no sessions across calls (a gRPC call or a page
 * run is one generation), and the shim has no prompt text, mode or max-new-tokens, so their cases there
 * are the shim's nearest equivalents (an empty or oversized context, the span size).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { Hono } from 'hono';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { interceptSteps, type CloudClient } from '../src/edge/cloud/cloud-client.ts';
import { EdgeGrpcServer } from '../src/edge/grpc/edge-grpc-server.ts';
import { EDGE_GENERATOR_SERVICE_NAME, edgeGeneratorService, type GenerateEvent__Output, type GenerateRequest } from '../src/edge/grpc/edge-proto.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { EdgeChat } from '../src/edge/chat/edge-chat.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_SERVICE_NAME_CHARS } from '../src/shared/grpc/health.ts';
import {
  CLOUD_ROUTER_SERVICE_NAME,
  CloudRouterClient,
  cloudRouterService,
  HealthClient,
  serializeRouteRequest,
  type CloudRouterClientType,
  type RouteRequest,
  type RouteResponse__Output,
  type ScoreRequest,
} from '../src/shared/grpc/proto.ts';
import { startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

/** Tools as JSON lines, then the turns; an assistant's calls as Qwen's template writes them (short: the demo model's context is 512 tokens). */
const TOOLS_TEMPLATE =
  '{% if tools %}{% for t in tools %}{{ t | tojson }}\n{% endfor %}{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}' +
  '{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>\n{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}{% endif %}' +
  '\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}';

/** As in src/edge/main.ts. */
const MAX_BODY_BYTES = 256 * 1024;
const ONE_MB = 1 << 20;
/** 602 tokens for the demo edge model, whose context window is 512. */
const LONG_PROMPT = 'Once upon a time '.repeat(150);
const OVER_CHAR_LIMIT = 'word '.repeat(4_000);

/**
 * The in-process cloud behind a gate: while held, routed steps wait (or end with the caller's abort), so
 * llm_only generations stay running for as long as a case needs them to.
 */
class GatedCloud {
  /** The client to give the edge: the inner cloud, its steps passing the gate. */
  readonly client: CloudClient;
  waiting = 0;
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => {};

  constructor(inner: CloudClient) {
    this.client = interceptSteps(inner, async (request, next) => {
      this.waiting++;
      try {
        await new Promise<void>((resolve, reject) => {
          const onAbort = () => reject(new DOMException('aborted', 'AbortError'));
          if (request.signal?.aborted) return onAbort();
          request.signal?.addEventListener('abort', onAbort, { once: true });
          void this.gate.then(() => {
            request.signal?.removeEventListener('abort', onAbort);
            resolve();
          });
        });
      } finally {
        this.waiting--;
      }
      return next(request);
    });
  }

  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open();
  }
}

/** One row of a matrix as observed: compared as a whole, so a failure lists every case that went wrong. */
interface Outcome {
  name: string;
  status: number | string;
  message: string;
}

function expected(name: string, status: number | string, message: string) {
  return { name, status, message: expect.stringContaining(message) };
}

let edge: TestEdge;
let gated: GatedCloud;

beforeAll(async () => {
  edge = await startTestEdge({ maxConcurrent: 2, cloud: (inProcess) => (gated = new GatedCloud(inProcess)).client });
});

afterAll(async () => {
  gated.release();
  await edge.release();
});

describe('edge HTTP API and page', () => {
  let app: Hono;

  beforeAll(() => {
    app = createEdgeApp(edge.runtime, { maxBodyBytes: MAX_BODY_BYTES });
  });

  const json = (body: unknown) =>
    app.request('/api/generate', {
      method: 'POST',
      body: typeof body === 'string' ? body : JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
  const rawJson = (bytes: Uint8Array) => app.request('/api/generate', { method: 'POST', body: bytes, headers: { 'content-type': 'application/json' } });
  const form = (fields: Record<string, string>, path = '/runs') =>
    app.request(path, { method: 'POST', body: new URLSearchParams(fields), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const multipart = (fields: Record<string, string>) => {
    const body = new FormData();
    for (const [k, v] of Object.entries(fields)) body.set(k, v);
    return app.request('/runs', { method: 'POST', body });
  };
  const rawForm = (body: string | Uint8Array, path = '/runs') =>
    app.request(path, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const bytes = (...parts: (string | number[])[]) => new Uint8Array(parts.flatMap((p) => (typeof p === 'string' ? [...new TextEncoder().encode(p)] : p)));

  /** The message a refusal carries: the JSON error's, or the text of the page fragment's alert. */
  async function outcome(name: string, res: Response): Promise<Outcome> {
    const text = await res.text();
    if (res.headers.get('content-type')?.includes('application/json'))
      return { name, status: res.status, message: (JSON.parse(text) as { error: { message: string } }).error.message };
    const alert = text.match(/<div class="error" role="alert">([^<]*)<\/div>/)?.[1];
    if (alert !== undefined) return { name, status: res.status, message: unescapeHtml(alert) };
    return { name, status: res.status, message: `no error message in: ${text.slice(0, 200)}` };
  }

  function unescapeHtml(s: string): string {
    return s.replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
  }

  /** Parses an SSE body into `{event, data}` records. */
  async function readSse(res: Response): Promise<{ event: string; data: string }[]> {
    return (await res.text())
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

  const runId = (html: string) => html.match(/\/runs\/([0-9a-f-]+)\/events/)![1]!;

  test('the whole matrix gets 4xx with messages; then a normal generation succeeds', async () => {
    const cases: [string, () => Response | Promise<Response>, number, string][] = [
      ['api: empty prompt', () => json({ prompt: '' }), 400, 'prompt must not be empty'],
      ['page: empty prompt', () => form({ prompt: '   ' }), 400, 'prompt must not be empty'],
      ['api: 1 MB prompt', () => json({ prompt: 'x'.repeat(ONE_MB) }), 413, `request body is larger than ${MAX_BODY_BYTES} bytes`],
      ['page: 1 MB prompt', () => form({ prompt: 'x'.repeat(ONE_MB) }), 413, `request body is larger than ${MAX_BODY_BYTES} bytes`],
      ['api: prompt above the character limit', () => json({ prompt: OVER_CHAR_LIMIT }), 400, 'prompt is 20000 characters; the limit is 16384'],
      ['api: prompt longer than the context window', () => json({ prompt: LONG_PROMPT }), 400, "prompt is 602 tokens; the edge model's context window is 512"],
      ['page: prompt longer than the context window', () => form({ prompt: LONG_PROMPT }), 400, "prompt is 602 tokens; the edge model's context window is 512"],
      [
        'compare: prompt longer than the context window',
        () => form({ prompt: LONG_PROMPT }, '/compare'),
        400,
        "prompt is 602 tokens; the edge model's context window is 512",
      ],
      ['api: threshold NaN', () => json({ prompt: 'x', threshold: 'NaN' }), 400, 'threshold must be a number, got "NaN"'],
      ['page: threshold NaN', () => form({ prompt: 'x', threshold: 'NaN' }), 400, 'threshold must be a number, got "NaN"'],
      ['api: threshold negative', () => json({ prompt: 'x', threshold: -0.1 }), 400, 'threshold must be in [0, 1], got -0.1'],
      ['page: threshold negative', () => form({ prompt: 'x', threshold: '-0.1' }), 400, 'threshold must be in [0, 1], got -0.1'],
      ['api: threshold above 1', () => json({ prompt: 'x', threshold: 1.5 }), 400, 'threshold must be in [0, 1], got 1.5'],
      ['page: threshold above 1', () => form({ prompt: 'x', threshold: '2' }), 400, 'threshold must be in [0, 1], got 2'],
      ['api: threshold not a number', () => json({ prompt: 'x', threshold: 'abc' }), 400, 'threshold must be a number, got "abc"'],
      ['api: threshold a boolean', () => json({ prompt: 'x', threshold: true }), 400, 'threshold must be a number, got true'],
      ['page: threshold not a number', () => form({ prompt: 'x', threshold: 'abc' }), 400, 'threshold must be a number, got "abc"'],
      ['api: max tokens 0', () => json({ prompt: 'x', max_new_tokens: 0 }), 400, 'max_new_tokens must be an integer in [1, 1024], got 0'],
      ['page: max tokens 0', () => form({ prompt: 'x', max_new_tokens: '0' }), 400, 'max_new_tokens must be an integer in [1, 1024], got 0'],
      ['api: max tokens huge', () => json({ prompt: 'x', max_new_tokens: 1e9 }), 400, 'max_new_tokens must be an integer in [1, 1024], got 1000000000'],
      [
        'page: max tokens huge',
        () => form({ prompt: 'x', max_new_tokens: '99999999999' }),
        400,
        'max_new_tokens must be an integer in [1, 1024], got 99999999999',
      ],
      ['api: a number in a string', () => json({ prompt: 'x', threshold: '0.7' }), 400, 'threshold must be a number, got "0.7"'],
      ['api: a hex number in a string', () => json({ prompt: 'x', max_new_tokens: '0x10' }), 400, 'max_new_tokens must be a number, got "0x10"'],
      ['api: a padded number in a string', () => json({ prompt: 'x', max_new_tokens: ' 8 ' }), 400, 'max_new_tokens must be a number, got " 8 "'],
      ['page: a hex number', () => form({ prompt: 'x', max_new_tokens: '0x10' }), 400, 'max_new_tokens must be a number, got "0x10"'],
      ['page: a padded number', () => form({ prompt: 'x', max_new_tokens: ' 8 ' }), 400, 'max_new_tokens must be a number, got " 8 "'],
      ['page: Infinity', () => form({ prompt: 'x', temperature: 'Infinity' }), 400, 'temperature must be a number, got "Infinity"'],
      ['page: a field given twice', () => rawForm('prompt=x&threshold=0.1&threshold=0.2'), 400, 'threshold is given 2 times; give it once'],
      ['api: top_p is read', () => json({ prompt: 'x', top_p: 0 }), 400, 'top_p must be in (0, 1], got 0'],
      ['api: route_span is read', () => json({ prompt: 'x', route_span: 99 }), 400, 'route_span must be an integer in [1, 16], got 99'],
      ['api: route_share 0', () => json({ prompt: 'x', route_share: 0 }), 400, 'route_share must be in (0, 1], got 0'],
      ['api: route_share above 1', () => json({ prompt: 'x', route_share: 1.5 }), 400, 'route_share must be in (0, 1], got 1.5'],
      ['api: route_share in a string', () => json({ prompt: 'x', route_share: '0.1' }), 400, 'route_share must be a number, got "0.1"'],
      ['page: route_share not a number', () => form({ prompt: 'x', route_share: 'ten percent' }), 400, 'route_share must be a number, got "ten percent"'],
      ['page: route_share negative', () => form({ prompt: 'x', route_share: '-0.1' }), 400, 'route_share must be in (0, 1], got -0.1'],
      [
        'api: route_tokens_per_minute fractional',
        () => json({ prompt: 'x', route_tokens_per_minute: 2.5 }),
        400,
        'route_tokens_per_minute must be an integer in [1, 10000000], got 2.5',
      ],
      [
        'page: route_tokens_per_minute 0',
        () => form({ prompt: 'x', route_tokens_per_minute: '0' }),
        400,
        'route_tokens_per_minute must be an integer in [1, 10000000], got 0',
      ],
      ['api: route_wait_ms negative', () => json({ prompt: 'x', route_wait_ms: -5 }), 400, 'route_wait_ms must be an integer in [1, 600000], got -5'],
      [
        'page: route_wait_ms above the limit',
        () => form({ prompt: 'x', route_wait_ms: '700000' }),
        400,
        'route_wait_ms must be an integer in [1, 600000], got 700000',
      ],
      [
        'api: a camelCase name',
        () => json({ prompt: 'x', maxNewTokens: 3 }),
        400,
        'unknown field "maxNewTokens" (did you mean "max_new_tokens"?); the fields are prompt, mode, threshold, max_new_tokens, temperature, top_p, seed, stop, route_span',
      ],
      ['api: unknown fields', () => json({ prompt: 'x', n: 2, topP: 0.5 }), 400, 'unknown fields "n", "topP" (did you mean "top_p"?); the fields are'],
      ['api: a __proto__ field', () => json('{"prompt":"x","__proto__":{"threshold":2}}'), 400, 'unknown field "__proto__"; the fields are'],
      ['page: a camelCase name', () => form({ prompt: 'x', routeSpan: '2' }), 400, 'unknown field "routeSpan" (did you mean "route_span"?)'],
      ['page: a __proto__ field', () => rawForm('prompt=x&__proto__=1'), 400, 'unknown field "__proto__"; the fields are'],
      ['api: unknown mode', () => json({ prompt: 'x', mode: 'turbo' }), 400, 'mode must be one of joint, small_only, llm_only, got "turbo"'],
      ['page: unknown mode', () => form({ prompt: 'x', mode: 'turbo' }), 400, 'mode must be one of joint, small_only, llm_only, got "turbo"'],
      ['api: invalid UTF-8 bytes', () => rawJson(bytes('{"prompt":"a', [0xff, 0xfe], 'b"}')), 400, 'the request body is not valid UTF-8'],
      ['api: lone surrogate escape', () => json('{"prompt":"a\\ud800b"}'), 400, 'prompt is not valid Unicode text (it holds a lone surrogate)'],
      ['page: invalid UTF-8 bytes', () => rawForm(bytes('prompt=a', [0xff, 0xfe], 'b')), 400, 'the form is not valid UTF-8'],
      ['page: invalid UTF-8 percent-escape', () => rawForm('prompt=a%FF%FEb'), 400, 'the form is not valid UTF-8 (a percent-escape does not decode)'],
      ['page: multipart form', () => multipart({ prompt: 'x' }), 400, 'a form must be sent as application/x-www-form-urlencoded, got multipart/form-data'],
      ['api: not JSON', () => json('{prompt'), 400, 'request body must be a JSON object'],
      ['api: an empty stop string', () => json({ prompt: 'x', stop: ['\n', ''] }), 400, 'stop[1] is empty: a stop string needs at least one character'],
      ['api: 100 empty stop strings', () => json({ prompt: 'x', stop: new Array(100).fill('') }), 400, 'stop must be at most 8 non-empty strings'],
      [
        'api: JSON sent as a form',
        () => app.request('/api/generate', { method: 'POST', body: '{"prompt":"x"}', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
        400,
        'the body is JSON but its Content-Type is application/x-www-form-urlencoded (what curl -d sends): send it with Content-Type: application/json',
      ],
      [
        'api: JSON sent as text/plain',
        () => app.request('/api/generate', { method: 'POST', body: '{"prompt":"x"}', headers: { 'content-type': 'text/plain' } }),
        400,
        'send the request as JSON with Content-Type: application/json (or as a form), got text/plain',
      ],
      [
        'api: JSON without a content type',
        () => app.request('/api/generate', { method: 'POST', body: new TextEncoder().encode('{"prompt":"x"}') }),
        400,
        'send the request as JSON with Content-Type: application/json (or as a form), got no content type',
      ],
      ['api: a form field given twice', () => rawForm('prompt=x&seed=1&seed=2', '/api/generate'), 400, 'seed is given 2 times; give it once'],
      ['api: a JSON array', () => json('["x"]'), 400, 'request body must be a JSON object'],
      ['api: conversation not a string', () => json({ prompt: 'x', conversation: 42 }), 400, 'conversation must be a string, got 42'],
      ['api: empty conversation', () => json({ prompt: 'x', conversation: '' }), 400, 'conversation must not be empty'],
      ['api: conversation too long', () => json({ prompt: 'x', conversation: 'c'.repeat(129) }), 400, 'conversation is 129 characters; the limit is 128'],
      [
        'api: a line break in conversation',
        () => json({ prompt: 'x', conversation: 'chat\r\nX-Evil: 1' }),
        400,
        'conversation must be printable ASCII (a header value); character 4 is U+000D',
      ],
      [
        'api: non-ASCII conversation',
        () => json({ prompt: 'x', conversation: 'chät' }),
        400,
        'conversation must be printable ASCII (a header value); character 2 is U+00E4',
      ],
      [
        'api: overlapping private spans',
        () =>
          json({
            prompt: 'Ann and Bo',
            private_spans: [
              [0, 3],
              [2, 6],
            ],
          }),
        400,
        'private_spans[1] = [2, 6) overlaps or comes before the span before it (which ends at 3); give spans in order, without overlaps',
      ],
      [
        'api: a private span past the prompt',
        () => json({ prompt: '🙂 Ann', private_spans: [[2, 9]] }),
        400,
        "private_spans[0] = [2, 9) is not a non-empty range inside the text's 5 code points",
      ],
      [
        'api: private spans not a list',
        () => json({ prompt: 'Ann', private_spans: 'Ann' }),
        400,
        'private_spans must be a list of [start, end] code-point ranges, got "Ann"',
      ],
      [
        'api: a private span of a bad kind',
        () => json({ prompt: 'Ann', private_spans: [[0, 3, 'Full Name']] }),
        400,
        'private_spans[0]: kind must be lowercase letters, digits and _ (at most 16, a letter first), got "Full Name"',
      ],
      // A prompt is never cut to fit the window (so a span is never cut with it): it is refused whole.
      [
        'api: private spans in a prompt longer than the context window',
        () => json({ prompt: LONG_PROMPT, private_spans: [[0, 4]] }),
        400,
        "prompt is 602 tokens; the edge model's context window is 512",
      ],
      [
        'api: private spans beside messages',
        () => json({ messages: [{ role: 'user', content: 'Ann' }], private_spans: [[0, 3]] }),
        400,
        'with messages, mark private spans in each message (messages[i].private_spans), not in the request',
      ],
      [
        'api: a message span past its content',
        () => json({ messages: [{ role: 'user', content: 'Ann', private_spans: [[1, 7]] }] }),
        400,
        "messages[0].private_spans[0] = [1, 7) is not a non-empty range inside the text's 3 code points",
      ],
      [
        'page: private spans not JSON',
        () => form({ prompt: 'Ann', private_spans: '[[0,' }),
        400,
        'private_spans must be a JSON list of [start, end] code-point ranges, got "[[0,"',
      ],
      [
        'page: overlapping private spans',
        () => form({ prompt: 'Ann and Bo', private_spans: '[[0,3],[2,6]]' }),
        400,
        'private_spans[1] = [2, 6) overlaps or comes before the span before it (which ends at 3); give spans in order, without overlaps',
      ],
      [
        'api: a JSON schema xgrammar refuses',
        () => json({ prompt: 'x', json_schema: { type: 'object', properties: 5 } }),
        400,
        'json_schema was refused by the grammar compiler: properties must be an object',
      ],
      [
        'api: a JSON schema of an unknown type',
        () => json({ prompt: 'x', json_schema: { type: 'strung' } }),
        400,
        'json_schema was refused by the grammar compiler: Unsupported type "strung"',
      ],
      [
        'api: a JSON schema keyword not enforced',
        () => json({ prompt: 'x', json_schema: { type: 'array', uniqueItems: true } }),
        400,
        'json_schema uses "uniqueItems" (at $), which constrained decoding does not enforce; remove it',
      ],
      [
        'api: a JSON schema over the size bound',
        () => json({ prompt: 'x', json_schema: { type: 'object', description: 'd'.repeat(40_000) } }),
        400,
        'json_schema is 40034 characters; the limit is 32768',
      ],
      [
        'api: a grammar with an undefined rule',
        () => json({ prompt: 'x', grammar: 'root ::= "a" | b' }),
        400,
        'grammar was refused by the grammar compiler: EBNF parser error at line 1, column 16: Rule "b" is not defined',
      ],
      [
        'page: a regex that does not parse',
        () => form({ prompt: 'x', regex: '[a-' }),
        400,
        "regex was refused by the grammar compiler: Regex parsing error at position 4: Unclosed '['",
      ],
      [
        'api: two constraints',
        () => json({ prompt: 'x', regex: 'a', choice: ['a'] }),
        400,
        'give at most one of regex, choice: a generation follows one constraint',
      ],
      ['api: an empty choice', () => json({ prompt: 'x', choice: [] }), 400, 'choice must be a list of 1 to 256 strings'],
      [
        'api: a schema no output fits in max_new_tokens',
        () => json({ prompt: 'x', max_new_tokens: 3, json_schema: { type: 'object', properties: { alpha: { type: 'string' } }, required: ['alpha'] } }),
        400,
        'the json_schema cannot be satisfied within 3 tokens: every output starts with "{\\"alpha\\": \\"", takes at least',
      ],
      [
        'page: a choice no output fits in max_new_tokens',
        () => form({ prompt: 'x', max_new_tokens: '2', choice: 'Once upon a time there was\nThe end of the story' }),
        400,
        'the choice cannot be satisfied within 2 tokens: its shortest choice to write,',
      ],
      [
        'page: stop an unknown run',
        () => app.request('/runs/00000000-0000-0000-0000-000000000000/stop', { method: 'POST' }),
        404,
        'no running generation 00000000-0000-0000-0000-000000000000',
      ],
    ];
    const outcomes: Outcome[] = [];
    for (const [name, send] of cases) outcomes.push(await outcome(name, await send()));

    // An expired run: stopped before its stream opened. Stopping again is a 404; its stream ends at once
    // with the reason (a 200 with a final `end` event, because htmx's SSE extension retries any other status).
    const expired = runId(await (await form({ prompt: 'Hi', max_new_tokens: '2' })).text());
    expect((await app.request(`/runs/${expired}/stop`, { method: 'POST' })).status).toBe(204);
    outcomes.push(await outcome('page: stop an expired run', await app.request(`/runs/${expired}/stop`, { method: 'POST' })));
    const stream = await readSse(await app.request(`/runs/${expired}/events`));
    expect(stream.map((e) => e.event)).toEqual(['end']);
    expect(stream[0]!.data).toContain('this generation is no longer running');

    // Too many concurrent generations: two llm_only ones held at their first routed token fill both slots.
    gated.hold();
    const running = [json({ prompt: 'Once', mode: 'llm_only', max_new_tokens: 3 }), json({ prompt: 'Upon', mode: 'llm_only', max_new_tokens: 3 })];
    const held = await Promise.all(running);
    await waitFor(() => gated.waiting === 2, 10_000, 'both generations at the cloud');
    outcomes.push(await outcome('api: too many concurrent generations', await json({ prompt: 'x', max_new_tokens: 2 })));
    outcomes.push(await outcome('page: too many concurrent generations', await form({ prompt: 'x', max_new_tokens: '2' })));
    outcomes.push(await outcome('compare: too many concurrent generations', await form({ prompt: 'x', max_new_tokens: '2' }, '/compare')));
    gated.release();
    for (const res of held) {
      const events = await readSse(res);
      expect(events.map((e) => e.event)).toEqual(['token', 'token', 'token', 'done']);
    }

    const busy = 'too many generations at once (limit 2); try again shortly';
    expect(outcomes).toEqual([
      ...cases.map(([name, , status, message]) => expected(name, status, message)),
      expected('page: stop an expired run', 404, `no running generation ${expired}`),
      expected('api: too many concurrent generations', 429, busy),
      expected('page: too many concurrent generations', 429, busy),
      expected('compare: too many concurrent generations', 429, busy),
    ]);
    expect(edge.runtime.activeCount).toBe(0);

    // Still serving: the API and the page each generate normally.
    const api = await readSse(await json({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: 3 }));
    expect(api.map((e) => e.event)).toEqual(['token', 'token', 'token', 'done']);
    // A form sent to the API is read as a form: the same fields, written as text.
    const apiForm = await readSse(await form({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: '3' }, '/api/generate'));
    expect(apiForm.map((e) => e.event)).toEqual(['token', 'token', 'token', 'done']);
    const texts = (events: { event: string; data: string }[]) =>
      events.filter((e) => e.event === 'token').map((e) => (JSON.parse(e.data) as { text: string }).text);
    expect(texts(apiForm)).toEqual(texts(api));
    const panel = await form({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: '3' });
    expect(panel.status).toBe(200);
    const page = await readSse(await app.request(`/runs/${runId(await panel.text())}/events`));
    expect(page.map((e) => e.event)).toEqual(['token', 'heat', 'token', 'heat', 'token', 'heat', 'metrics', 'end']);
    expect(edge.runtime.activeCount).toBe(0);
  });
});

describe('edge OpenAI API (/v1)', () => {
  let app: Hono;
  /** The same edge with a short template that renders tools and writes calls as Qwen's does, and with ChatML, which renders no tools. */
  let toolsApp: Hono;
  let chatmlApp: Hono;
  const templateDir = mkdtempSync(join(tmpdir(), 'bad-input-template-'));

  beforeAll(() => {
    app = createEdgeApp(edge.runtime, { maxBodyBytes: MAX_BODY_BYTES });
    const toolsTemplate = join(templateDir, 'tools.jinja');
    writeFileSync(toolsTemplate, TOOLS_TEMPLATE);
    const { tokenizer } = edge.runtime.engine;
    toolsApp = createEdgeApp(edge.runtime, { maxBodyBytes: MAX_BODY_BYTES, chat: EdgeChat.load(tokenizer, { template: toolsTemplate, modelName: MODEL }) });
    chatmlApp = createEdgeApp(edge.runtime, { maxBodyBytes: MAX_BODY_BYTES, chat: EdgeChat.load(tokenizer, { template: 'chatml', modelName: MODEL }) });
  });

  afterAll(() => rmSync(templateDir, { recursive: true, force: true }));

  const MODEL = 'stories260k-distilled-1l';
  const post = (path: string, body: unknown) =>
    app.request(`/v1/${path}`, {
      method: 'POST',
      body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
  const completion = (fields: Record<string, unknown>) => post('completions', { model: MODEL, prompt: 'x', ...fields });
  const chat = (fields: Record<string, unknown>) => post('chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'x' }], ...fields });
  const chatOn = (target: Hono, fields: Record<string, unknown>) =>
    target.request('/v1/chat/completions', {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 8, ...fields }),
      headers: { 'content-type': 'application/json' },
    });
  const ADD = { type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] } } };
  const CALLED = { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a": 1}' } }] };
  const tooled = (fields: Record<string, unknown>) => chatOn(toolsApp, { tools: [ADD], ...fields });
  const invalidUtf8 = new Uint8Array([...new TextEncoder().encode(`{"model":"${MODEL}","prompt":"a`), 0xff, 0xfe, ...new TextEncoder().encode('b"}')]);

  /** One refusal as observed: status, and the OpenAI error's message and param (which names the field at fault). */
  async function outcome(name: string, res: Response): Promise<Outcome & { param: string | null }> {
    const text = await res.text();
    try {
      const { error } = JSON.parse(text) as { error: { message: string; type: string; param: string | null } };
      return { name, status: res.status, message: error.message, param: error.param };
    } catch {
      return { name, status: res.status, message: `not an OpenAI error: ${text.slice(0, 200)}`, param: null };
    }
  }

  /** `data:` payloads of an OpenAI stream. */
  async function streamData(res: Response): Promise<string[]> {
    return (await res.text())
      .split('\n\n')
      .filter((b) => b.startsWith('data: '))
      .map((b) => b.slice(6));
  }

  test('the whole matrix gets OpenAI errors with messages and params; then a normal completion succeeds', async () => {
    const cases: [string, () => Response | Promise<Response>, number, string, string | null][] = [
      ['empty prompt', () => completion({ prompt: '  ' }), 400, 'prompt must not be empty', 'prompt'],
      ['1 MB prompt', () => completion({ prompt: 'x'.repeat(ONE_MB) }), 413, `request body is larger than ${MAX_BODY_BYTES} bytes`, null],
      ['prompt above the character limit', () => completion({ prompt: OVER_CHAR_LIMIT }), 400, 'prompt is 20000 characters; the limit is 16384', null],
      [
        'prompt longer than the context window',
        () => completion({ prompt: LONG_PROMPT }),
        400,
        "prompt is 602 tokens; the edge model's context window is 512",
        null,
      ],
      [
        'token ids longer than the context window',
        () => completion({ prompt: new Array(600).fill(403) }),
        400,
        "prompt is 600 tokens; the edge model's context window is 512",
        null,
      ],
      ['token id outside the vocabulary', () => completion({ prompt: [1, 600] }), 400, 'prompt: token id 600 is not in the vocabulary (512 ids)', 'prompt'],
      [
        'token ids that are not integers',
        () => completion({ prompt: [1, 2.5] }),
        400,
        'prompt must be a string or a non-empty list of token ids (non-negative integers)',
        'prompt',
      ],
      ['a batch of prompts', () => completion({ prompt: ['a', 'b'] }), 400, 'prompt holds 2 prompts; this edge answers one per request', 'prompt'],
      ['no prompt', () => post('completions', { model: MODEL }), 400, 'prompt is required', 'prompt'],
      ['no model', () => post('completions', { prompt: 'x' }), 400, 'model is required (GET /v1/models lists it)', 'model'],
      ['unknown model', () => completion({ model: 'gpt-4o' }), 404, `the model "gpt-4o" does not exist on this edge; it serves ${MODEL}`, 'model'],
      ['unknown model (chat)', () => chat({ model: 'gpt-4o' }), 404, `the model "gpt-4o" does not exist on this edge; it serves ${MODEL}`, 'model'],
      ['temperature NaN', () => completion({ temperature: 'NaN' }), 400, 'temperature must be a number, got "NaN"', 'temperature'],
      ['temperature above 2', () => completion({ temperature: 2.5 }), 400, 'temperature must be in [0, 2], got 2.5', 'temperature'],
      ['top_p 0', () => completion({ top_p: 0 }), 400, 'top_p must be in (0, 1], got 0', 'top_p'],
      ['routing_threshold negative', () => completion({ routing_threshold: -0.1 }), 400, 'routing_threshold must be in [0, 1], got -0.1', 'routing_threshold'],
      ['routing_threshold above 1', () => completion({ routing_threshold: 1.5 }), 400, 'routing_threshold must be in [0, 1], got 1.5', 'routing_threshold'],
      [
        'routing_threshold not a number',
        () => completion({ routing_threshold: 'abc' }),
        400,
        'routing_threshold must be a number, got "abc"',
        'routing_threshold',
      ],
      [
        'unknown routing_mode',
        () => completion({ routing_mode: 'turbo' }),
        400,
        'routing_mode must be one of joint, small_only, llm_only, got "turbo"',
        'routing_mode',
      ],
      ['prompt_cache_key not a string', () => chat({ prompt_cache_key: 7 }), 400, 'prompt_cache_key must be a string, got 7', 'prompt_cache_key'],
      [
        'prompt_cache_key too long',
        () => completion({ prompt_cache_key: 'k'.repeat(129) }),
        400,
        'prompt_cache_key is 129 characters; the limit is 128',
        'prompt_cache_key',
      ],
      [
        'prompt_cache_key with a control character',
        () => chat({ prompt_cache_key: 'a\u0000b' }),
        400,
        'prompt_cache_key must be printable ASCII (a header value); character 1 is U+0000',
        'prompt_cache_key',
      ],
      ['route_span above the limit', () => completion({ route_span: 17 }), 400, 'route_span must be an integer in [1, 16], got 17', 'route_span'],
      ['route_share 0', () => completion({ route_share: 0 }), 400, 'route_share must be in (0, 1], got 0', 'route_share'],
      ['route_share not a number', () => chat({ route_share: '10%' }), 400, 'route_share must be a number, got "10%"', 'route_share'],
      [
        'route_tokens_per_minute fractional',
        () => completion({ route_tokens_per_minute: 2.5 }),
        400,
        'route_tokens_per_minute must be an integer in [1, 10000000], got 2.5',
        'route_tokens_per_minute',
      ],
      ['route_wait_ms in a string', () => chat({ route_wait_ms: '300' }), 400, 'route_wait_ms must be an integer in [1, 600000], got "300"', 'route_wait_ms'],
      [
        'route_wait_ms above the limit',
        () => completion({ route_wait_ms: 600_001 }),
        400,
        'route_wait_ms must be an integer in [1, 600000], got 600001',
        'route_wait_ms',
      ],
      ['max_tokens 0', () => completion({ max_tokens: 0 }), 400, 'max_tokens must be an integer in [1, 1024], got 0', 'max_tokens'],
      ['max_tokens huge', () => completion({ max_tokens: 1e9 }), 400, 'max_tokens must be an integer in [1, 1024], got 1000000000', 'max_tokens'],
      [
        'max_completion_tokens 0',
        () => chat({ max_completion_tokens: 0 }),
        400,
        'max_completion_tokens must be an integer in [1, 1024], got 0',
        'max_completion_tokens',
      ],
      ['seed negative', () => completion({ seed: -1 }), 400, 'seed must be an integer in [0, 4294967295], got -1', 'seed'],
      [
        'five stop strings',
        () => completion({ stop: ['a', 'b', 'c', 'd', 'e'] }),
        400,
        'stop must be a non-empty string or a list of at most 4 of them',
        'stop',
      ],
      [
        'an empty stop string',
        () => completion({ stop: ['a', ''] }),
        400,
        'stop must be a non-empty string or a list of at most 4 of them, got ["a",""]',
        'stop',
      ],
      [
        'a prompt nested 120,000 lists deep',
        () => post('completions', `{"model":"${MODEL}","prompt":${'['.repeat(120_000)}"a"${']'.repeat(120_000)}}`),
        400,
        'prompt must be a string or a non-empty list of token ids (non-negative integers), or a list of one of them',
        'prompt',
      ],
      ['a prompt nested three lists deep', () => completion({ prompt: [[['a']]] }), 400, 'prompt must be a string or a non-empty list of token ids', 'prompt'],
      ...Object.getOwnPropertyNames(Object.prototype).map((role): [string, () => Response | Promise<Response>, number, string, string] => [
        `chat: the role ${role} (Object.prototype's)`,
        () => chat({ messages: [{ role, content: 'x' }] }),
        400,
        `messages[0].role must be one of system, developer, user, assistant, tool, got ${JSON.stringify(role)}`,
        'messages[0].role',
      ]),
      // A top-level key named like an object property once answered 500 (issue 45, item 2); an own key, it is refused by name.
      ...Object.getOwnPropertyNames(Object.prototype).flatMap((key): [string, () => Response | Promise<Response>, number, string, string][] => {
        const withKey = (base: Record<string, unknown>) => `${JSON.stringify(base).slice(0, -1)},${JSON.stringify(key)}:1}`;
        return [
          [
            `completions: the key ${key}`,
            () => post('completions', withKey({ model: MODEL, prompt: 'x' })),
            400,
            `unsupported parameter: ${key} is not supported by this edge`,
            key,
          ],
          [
            `chat: the key ${key}`,
            () => post('chat/completions', withKey({ model: MODEL, messages: [{ role: 'user', content: 'x' }] })),
            400,
            `unsupported parameter: ${key} is not supported by this edge`,
            key,
          ],
          [
            `stream_options: the key ${key}`,
            () => post('completions', `{"model":"${MODEL}","prompt":"x","stream":true,"stream_options":${withKey({ include_usage: true })}}`),
            400,
            `unsupported parameter: ${key}`,
            key,
          ],
        ];
      }),
      ['n 2', () => completion({ n: 2 }), 400, 'n must be 1: this edge generates one choice per request, got 2', 'n'],
      ['unsupported parameter', () => completion({ suffix: '!' }), 400, 'unsupported parameter: suffix is not supported by this edge', 'suffix'],
      ['logprobs past the most alternatives', () => completion({ logprobs: 21 }), 400, 'logprobs must be an integer in [0, 20], got 21', 'logprobs'],
      [
        'response_format of an unknown type',
        () => completion({ response_format: { type: 'xml' } }),
        400,
        'response_format.type must be text, json_object or json_schema, got "xml"',
        'response_format.type',
      ],
      [
        'response_format json_schema without a schema',
        () => chat({ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }),
        400,
        'response_format.json_schema must be an object with a schema',
        'response_format.json_schema',
      ],
      [
        'response_format with a schema xgrammar refuses',
        () => completion({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'strung' } } } }),
        400,
        'json_schema was refused by the grammar compiler: Unsupported type "strung"',
        null,
      ],
      [
        'structured_outputs with an unknown key',
        () => completion({ structured_outputs: { yaml: 'x' } }),
        400,
        'structured_outputs.yaml is not supported; the keys are json, regex, choice, grammar, json_object, structural_tag',
        'structured_outputs.yaml',
      ],
      [
        'two ways of constraining',
        () => completion({ response_format: { type: 'json_object' }, guided_regex: 'a+' }),
        400,
        'give one constraint: response_format and guided_regex were both given',
        'guided_regex',
      ],
      [
        'guided_grammar that does not parse',
        () => completion({ guided_grammar: 'root ::= (' }),
        400,
        'grammar was refused by the grammar compiler: EBNF parser error',
        null,
      ],
      [
        'stream_options without stream',
        () => completion({ stream_options: { include_usage: true } }),
        400,
        'stream_options is only allowed with stream: true',
        'stream_options',
      ],
      [
        'unknown stream option',
        () => completion({ stream: true, stream_options: { include_obfuscation: true } }),
        400,
        'unsupported parameter: include_obfuscation',
        'include_obfuscation',
      ],
      ['stream not a boolean', () => completion({ stream: 'yes' }), 400, 'stream must be a boolean, got "yes"', 'stream'],
      ['invalid UTF-8 bytes', () => post('completions', invalidUtf8), 400, 'the request body is not valid UTF-8', null],
      [
        'lone surrogate escape',
        () => post('completions', `{"model":"${MODEL}","prompt":"a\\ud800b"}`),
        400,
        'prompt is not valid Unicode text (it holds a lone surrogate)',
        null,
      ],
      ['not JSON', () => post('completions', '{prompt'), 400, 'request body must be a JSON object', null],
      ['a JSON array', () => post('completions', '["x"]'), 400, 'request body must be a JSON object', null],
      ['chat: no messages', () => chat({ messages: [] }), 400, 'messages must be a non-empty list', 'messages'],
      [
        'chat: an unknown role',
        () => chat({ messages: [{ role: 'function', content: 'x' }] }),
        400,
        'messages[0].role must be one of system, developer, user, assistant, tool, got "function"',
        'messages[0].role',
      ],
      [
        'tools: a tool message without tool_call_id',
        () => tooled({ messages: [{ role: 'user', content: 'x' }, CALLED, { role: 'tool', content: '2' }] }),
        400,
        'messages[2].tool_call_id is required on a tool message: the id of the call it answers',
        'messages[2].tool_call_id',
      ],
      [
        'tools: a tool message answering no call',
        () => tooled({ messages: [{ role: 'user', content: 'x' }, CALLED, { role: 'tool', tool_call_id: 'call_9', content: '2' }] }),
        400,
        'messages[2].tool_call_id "call_9" answers no tool call of an earlier assistant message',
        'messages[2].tool_call_id',
      ],
      [
        'tools: a call whose arguments are not JSON',
        () =>
          tooled({
            messages: [
              { role: 'user', content: 'x' },
              { ...CALLED, tool_calls: [{ id: 'c', type: 'function', function: { name: 'add', arguments: '{a' } }] },
            ],
          }),
        400,
        'messages[1].tool_calls[0].function.arguments must be the JSON text of an object, got "{a"',
        'messages[1].tool_calls[0].function.arguments',
      ],
      ['tools: not a list', () => tooled({ tools: { type: 'function' } }), 400, 'tools must be a list of 1 to 128 function tools', 'tools'],
      ['tools: an empty list', () => tooled({ tools: [] }), 400, 'tools must be a list of 1 to 128 function tools, got []', 'tools'],
      [
        'tools: not a function tool',
        () => tooled({ tools: [{ type: 'web_search' }] }),
        400,
        'tools[0] must be {type: "function", function: {name, description, parameters}}',
        'tools[0]',
      ],
      [
        'tools: a bad function name',
        () => tooled({ tools: [{ type: 'function', function: { name: 'add numbers' } }] }),
        400,
        'tools[0].function.name must be 1 to 64 letters, digits, underscores or dashes, got "add numbers"',
        'tools[0].function.name',
      ],
      [
        'tools: a name given twice',
        () => tooled({ tools: [ADD, ADD] }),
        400,
        'tools[1].function.name: a second function named "add"',
        'tools[1].function.name',
      ],
      [
        'tools: parameters of a string',
        () => tooled({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] }),
        400,
        'tools[0].function.parameters must describe an object (type "object"), got type "string"',
        'tools[0].function.parameters',
      ],
      [
        'tools: parameters with a keyword not enforced',
        () =>
          tooled({
            tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } } } }],
          }),
        400,
        'tools[0].function.parameters uses "uniqueItems" (at $.properties.a), which constrained decoding does not enforce; remove it',
        'tools[0].function.parameters',
      ],
      [
        'tools: parameters xgrammar refuses',
        () => tooled({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'strung' } } } } }] }),
        400,
        'tools was refused by the grammar compiler: Unsupported type "strung"',
        null,
      ],
      [
        'tools: tool_choice names an unknown function',
        () => tooled({ tool_choice: { type: 'function', function: { name: 'sub' } } }),
        400,
        'tool_choice names the function "sub", which is not among tools (add)',
        'tool_choice.function.name',
      ],
      ['tools: tool_choice of an unknown kind', () => tooled({ tool_choice: 'always' }), 400, 'tool_choice must be none, auto, required or', 'tool_choice'],
      [
        'tools: tool_choice without tools',
        () => chatOn(toolsApp, { tool_choice: 'auto' }),
        400,
        'tool_choice is only allowed when tools are given',
        'tool_choice',
      ],
      [
        'tools: with a response_format',
        () => tooled({ tool_choice: 'required', response_format: { type: 'json_object' } }),
        400,
        'tools hold the reply to function calls; give a response_format or other constraint only with tool_choice none',
        null,
      ],
      [
        'tools: a call that cannot fit max_tokens',
        () => tooled({ tool_choice: 'required', max_tokens: 2 }),
        400,
        'the tools cannot be satisfied within 2 tokens',
        null,
      ],
      ['tools: a template that does not render them', () => chatOn(chatmlApp, { tools: [ADD] }), 400, "this model's chat template does not render tools", null],
      [
        'tools: a call in the history on a template that does not render them',
        () => chatOn(chatmlApp, { messages: [{ role: 'user', content: 'x' }, CALLED, { role: 'tool', tool_call_id: 'call_1', content: '2' }] }),
        400,
        "this model's chat template does not render tools",
        null,
      ],
      ['tools: a model without a chat template', () => chat({ tools: [ADD] }), 400, `model ${MODEL} has no chat template`, 'messages'],
      [
        'chat: an image part',
        () => chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
        400,
        'messages[0].content[0]: only text parts are supported, got type "image_url"',
        'messages[0].content[0]',
      ],
      [
        'chat: tool calls on a user message',
        () => chat({ messages: [{ role: 'user', content: 'x', tool_calls: [] }] }),
        400,
        'unsupported parameter: messages[0].tool_calls is not supported by this edge on a user message',
        'messages[0].tool_calls',
      ],
      [
        'chat: an empty list of tool calls',
        () => chat({ messages: [{ role: 'assistant', content: 'x', tool_calls: [] }] }),
        400,
        'messages[0].tool_calls must be a non-empty list of calls',
        'messages[0].tool_calls',
      ],
      [
        'chat: a model without a chat template',
        () => chat({}),
        400,
        `model ${MODEL} has no chat template (no chat_template.jinja, no chat_template in its tokenizer_config.json; the edge's --chat-template can name one); send a prompt instead (to /v1/completions)`,
        'messages',
      ],
      ['unknown endpoint', () => app.request('/v1/embeddings', { method: 'POST', body: '{}' }), 404, 'no such endpoint: POST /v1/embeddings', null],
    ];
    const outcomes = [];
    for (const [name, send] of cases) outcomes.push(await outcome(name, await send()));

    // Too many concurrent generations: two llm_only streams held at their first routed token fill both slots.
    gated.hold();
    const held = await Promise.all(['Once', 'Upon'].map((prompt) => completion({ prompt, routing_mode: 'llm_only', max_tokens: 3, stream: true })));
    await waitFor(() => gated.waiting === 2, 10_000, 'both generations at the cloud');
    outcomes.push(await outcome('too many concurrent generations', await completion({ max_tokens: 2 })));
    outcomes.push(await outcome('too many concurrent generations (chat)', await chat({ max_tokens: 2 })));
    gated.release();
    for (const res of held) {
      const data = await streamData(res);
      expect(data).toHaveLength(5); // three tokens, the finish, [DONE]
      expect(data.at(-1)).toBe('[DONE]');
      expect(JSON.parse(data.at(-2)!).choices[0].finish_reason).toBe('length');
    }

    const busy = 'too many generations at once (limit 2); try again shortly';
    expect(outcomes).toEqual([
      ...cases.map(([name, , status, message, param]) => ({ ...expected(name, status, message), param })),
      { ...expected('too many concurrent generations', 429, busy), param: null },
      // The template check comes before the slot: a model without one answers 400 even when busy.
      { ...expected('too many concurrent generations (chat)', 400, 'has no chat template'), param: 'messages' },
    ]);
    expect(edge.runtime.activeCount).toBe(0);

    // Still serving.
    const ok = await completion({ prompt: 'Once upon a time', routing_mode: 'small_only', max_tokens: 3 });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
    expect(edge.runtime.activeCount).toBe(0);
  });
});

describe('edge gRPC Generate', () => {
  const GENERATE = '/tokenrouter.edge.v1.EdgeGenerator/Generate';
  let server: EdgeGrpcServer;
  let client: grpc.Client;

  beforeAll(async () => {
    server = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, maxReceiveBytes: MAX_BODY_BYTES });
    client = new grpc.Client(`127.0.0.1:${await server.start()}`, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client.close();
    await server.shutdown(1000);
  });

  const message = (request: GenerateRequest) => edgeGeneratorService.Generate.requestSerialize(request);
  /** Length-delimited field `n` holding `body` (a hand-built protobuf fragment). */
  const lenField = (n: number, body: number[]) => [(n << 3) | 2, body.length, ...body];
  const utf8 = (s: string) => [...Buffer.from(s)];

  /** A call that sends `bytes` as they are, so the server sees exactly what a broken client would send. */
  function call(bytes: Buffer) {
    const stream = client.makeServerStreamRequest(
      GENERATE,
      (b: Buffer) => b,
      (b: Buffer) => edgeGeneratorService.Generate.responseDeserialize(b),
      bytes,
      new grpc.Metadata(),
      {
        deadline: Date.now() + 30_000,
      },
    );
    const events: GenerateEvent__Output[] = [];
    stream.on('data', (e: GenerateEvent__Output) => events.push(e));
    stream.on('error', () => {});
    const status = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
    return { cancel: () => stream.cancel(), events, status };
  }

  async function outcome(name: string, bytes: Buffer): Promise<Outcome> {
    const s = await call(bytes).status;
    return { name, status: grpc.status[s.code], message: s.details };
  }

  test('the whole matrix gets specific statuses with messages; then a normal generation succeeds', async () => {
    const oneMb = message({ prompt: 'x'.repeat(ONE_MB) });
    const cases: [string, Buffer, keyof typeof grpc.status, string][] = [
      ['empty prompt', message({ prompt: '' }), 'INVALID_ARGUMENT', 'prompt must not be empty'],
      ['an empty stop string', message({ prompt: 'x', stop: ['.', ''] }), 'INVALID_ARGUMENT', 'stop[1] is empty: a stop string needs at least one character'],
      ['a JSON schema that is not JSON', message({ prompt: 'x', jsonSchema: '{"type": ' }), 'INVALID_ARGUMENT', 'json_schema is not valid JSON'],
      [
        'a regex xgrammar refuses',
        message({ prompt: 'x', regex: '(?<=a)b' }),
        'INVALID_ARGUMENT',
        'regex was refused by the grammar compiler: Regex parsing error at position 3: Lookbehind is not supported yet.',
      ],
      [
        'a choice no output fits in max_new_tokens',
        message({ prompt: 'x', maxNewTokens: 1, choice: ['Once upon a time'] }),
        'INVALID_ARGUMENT',
        'the choice cannot be satisfied within 1 tokens',
      ],
      ['1 MB prompt', oneMb, 'RESOURCE_EXHAUSTED', `Received message larger than max (${oneMb.length} vs ${MAX_BODY_BYTES})`],
      ['prompt above the character limit', message({ prompt: OVER_CHAR_LIMIT }), 'INVALID_ARGUMENT', 'prompt is 20000 characters; the limit is 16384'],
      [
        'prompt longer than the context window',
        message({ prompt: LONG_PROMPT }),
        'INVALID_ARGUMENT',
        "prompt is 602 tokens; the edge model's context window is 512",
      ],
      ['threshold NaN', message({ prompt: 'x', threshold: Number.NaN }), 'INVALID_ARGUMENT', 'threshold must be a number, got NaN'],
      [
        'conversation with a line break',
        message({ prompt: 'x', conversation: 'a\nb' }),
        'INVALID_ARGUMENT',
        'conversation must be printable ASCII (a header value); character 1 is U+000A',
      ],
      [
        'conversation too long',
        message({ prompt: 'x', conversation: 'c'.repeat(129) }),
        'INVALID_ARGUMENT',
        'conversation is 129 characters; the limit is 128',
      ],
      ['threshold negative', message({ prompt: 'x', threshold: -0.5 }), 'INVALID_ARGUMENT', 'threshold must be in [0, 1], got -0.5'],
      ['threshold above 1', message({ prompt: 'x', threshold: 1.5 }), 'INVALID_ARGUMENT', 'threshold must be in [0, 1], got 1.5'],
      [
        'threshold not a number (a string on the wire)',
        Buffer.from([...lenField(1, utf8('x')), ...lenField(3, utf8('abc'))]),
        'INVALID_ARGUMENT',
        'malformed GenerateRequest: field threshold (3) has wire type 2; its type float needs 5',
      ],
      ['max tokens 0', message({ prompt: 'x', maxNewTokens: 0 }), 'INVALID_ARGUMENT', 'max_new_tokens must be an integer in [1, 1024], got 0'],
      [
        'max tokens huge',
        message({ prompt: 'x', maxNewTokens: 4_294_967_295 }),
        'INVALID_ARGUMENT',
        'max_new_tokens must be an integer in [1, 1024], got 4294967295',
      ],
      ['top_p 0', message({ prompt: 'x', topP: 0 }), 'INVALID_ARGUMENT', 'top_p must be in (0, 1], got 0'],
      ['route_span above the limit', message({ prompt: 'x', routeSpan: 99 }), 'INVALID_ARGUMENT', 'route_span must be an integer in [1, 16], got 99'],
      ['route_share 0', message({ prompt: 'x', routeShare: 0 }), 'INVALID_ARGUMENT', 'route_share must be in (0, 1], got 0'],
      ['route_share above 1', message({ prompt: 'x', routeShare: 1.5 }), 'INVALID_ARGUMENT', 'route_share must be in (0, 1], got 1.5'],
      ['route_share NaN', message({ prompt: 'x', routeShare: Number.NaN }), 'INVALID_ARGUMENT', 'route_share must be a number, got NaN'],
      [
        'route_tokens_per_minute 0',
        message({ prompt: 'x', routeTokensPerMinute: 0 }),
        'INVALID_ARGUMENT',
        'route_tokens_per_minute must be an integer in [1, 10000000], got 0',
      ],
      [
        'route_wait_ms above the limit',
        message({ prompt: 'x', routeWaitMs: 4_294_967_295 }),
        'INVALID_ARGUMENT',
        'route_wait_ms must be an integer in [1, 600000], got 4294967295',
      ],
      [
        'overlapping private spans',
        message({
          prompt: 'Ann and Bo',
          privateSpans: [
            { start: 0, end: 3 },
            { start: 2, end: 6 },
          ],
        }),
        'INVALID_ARGUMENT',
        'private_spans[1] = [2, 6) overlaps or comes before the span before it (which ends at 3); give spans in order, without overlaps',
      ],
      [
        'a private span past the prompt',
        message({ prompt: 'Ann', privateSpans: [{ start: 1, end: 40 }] }),
        'INVALID_ARGUMENT',
        "private_spans[0] = [1, 40) is not a non-empty range inside the text's 3 code points",
      ],
      [
        'a private span of a bad kind',
        message({ prompt: 'Ann', privateSpans: [{ start: 0, end: 3, kind: 'Name' }] }),
        'INVALID_ARGUMENT',
        'private_spans[0]: kind must be lowercase letters, digits and _ (at most 16, a letter first), got "Name"',
      ],
      ['unknown mode', message({ prompt: 'x', mode: 'turbo' }), 'INVALID_ARGUMENT', 'mode must be one of joint, small_only, llm_only, got "turbo"'],
      [
        'invalid UTF-8 in the prompt',
        Buffer.from(lenField(1, [0x61, 0xff, 0xfe, 0x62])),
        'INVALID_ARGUMENT',
        'malformed GenerateRequest: field prompt (1) is not valid UTF-8',
      ],
      [
        'invalid UTF-8 in a stop string',
        Buffer.from([...lenField(1, utf8('x')), ...lenField(8, [0xc3])]),
        'INVALID_ARGUMENT',
        'malformed GenerateRequest: field stop (8) is not valid UTF-8',
      ],
      ['malformed protobuf: garbage', Buffer.from([0xff, 0xff, 0xff]), 'INVALID_ARGUMENT', 'malformed GenerateRequest: truncated varint at byte 0'],
      [
        'malformed protobuf: a length past the end',
        Buffer.from([0x0a, 0x10, 0x41]),
        'INVALID_ARGUMENT',
        'malformed GenerateRequest: field prompt (1) at byte 2 needs 16 bytes, 1 left',
      ],
      ['malformed protobuf: invalid wire type', Buffer.from([0x0f, 0x00]), 'INVALID_ARGUMENT', 'malformed GenerateRequest: invalid wire type 7 at byte 0'],
    ];
    const outcomes: Outcome[] = [];
    for (const [name, bytes] of cases) outcomes.push(await outcome(name, bytes));

    // Too many concurrent generations: two llm_only calls held at their first routed token.
    gated.hold();
    const held = [call(message({ prompt: 'Once', mode: 'llm_only', maxNewTokens: 3 })), call(message({ prompt: 'Upon', mode: 'llm_only', maxNewTokens: 3 }))];
    await waitFor(() => gated.waiting === 2, 10_000, 'both generations at the cloud');
    outcomes.push(await outcome('too many concurrent generations', message({ prompt: 'x', maxNewTokens: 2 })));
    // The held calls are cancelled by their client: the generations stop and give their slots back.
    for (const h of held) h.cancel();
    for (const h of held) expect((await h.status).code).toBe(grpc.status.CANCELLED);
    await waitFor(() => edge.runtime.activeCount === 0, 10_000, 'cancelled generations to end');
    gated.release();

    expect(outcomes).toEqual([
      ...cases.map(([name, , status, text]) => expected(name, status, text)),
      expected('too many concurrent generations', 'RESOURCE_EXHAUSTED', 'too many generations at once (limit 2); try again shortly'),
    ]);

    const ok = call(message({ prompt: 'Once upon a time', mode: 'small_only', maxNewTokens: 3 }));
    expect((await ok.status).code).toBe(grpc.status.OK);
    expect(ok.events.map((e) => e.event)).toEqual(['token', 'token', 'token', 'done']);
    expect(ok.events.at(-1)!.done!.finishReason).toBe('length');
    expect(edge.runtime.activeCount).toBe(0);
  });
});

describe('cloud shim Route', () => {
  const ROUTE = '/tokenrouter.cloud.v1.CloudRouter/Route';
  const MAX_MESSAGE_BYTES = 64 * 1024;
  const IDLE_MS = 1_500;
  let shim: ShimServer;
  let client: grpc.Client;

  beforeAll(async () => {
    shim = await startTestShim({ maxSessions: 2, maxMessageBytes: MAX_MESSAGE_BYTES, sessionIdleMs: IDLE_MS });
    client = new grpc.Client(shim.address, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client.close();
    await shim.shutdown();
  });

  const wire = (request: RouteRequest) => serializeRouteRequest(request);
  const open = (contextIds: number[], requestId = 'bad-input') => wire({ open: { requestId, sampling: { temperature: 0 }, contextIds } });
  const step = (fields: NonNullable<RouteRequest['step']>) => wire({ step: { offset: 1, threshold: 0.5, ...fields } });
  const extend = (fields: NonNullable<RouteRequest['extend']>) => wire({ extend: fields });

  /** A Route stream carrying `messages` as raw bytes; half-closes after them unless `keepOpen`. */
  function route(messages: Buffer[], keepOpen = false) {
    const stream = client.makeBidiStreamRequest(
      ROUTE,
      (b: Buffer) => b,
      (b: Buffer) => cloudRouterService.Route.responseDeserialize(b),
      new grpc.Metadata(),
      {
        deadline: Date.now() + 30_000,
      },
    );
    const responses: RouteResponse__Output[] = [];
    stream.on('data', (m: RouteResponse__Output) => responses.push(m));
    stream.on('error', () => {});
    const status = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
    for (const m of messages) stream.write(m);
    if (!keepOpen) stream.end();
    return { responses, status, end: () => stream.end() };
  }

  async function outcome(name: string, messages: Buffer[], keepOpen = false): Promise<Outcome> {
    const r = route(messages, keepOpen);
    const s = await r.status;
    // Every failure that reached the session core also ends with a final `end` message saying the same.
    const end = r.responses.at(-1)?.end;
    if (end && end.code !== s.code) return { name, status: `end says ${end.code}, status ${s.code}`, message: s.details };
    return { name, status: grpc.status[s.code], message: s.details };
  }

  test('the whole matrix gets specific statuses with messages; then a normal session succeeds', async () => {
    const requestId = [0x0a, 0x02, 0xff, 0xfe]; // OpenSession.request_id, not UTF-8
    const contextIds = [0x1a, 0x01, 0x01]; // OpenSession.context_ids = [1]
    const oneMb = open(new Array(ONE_MB).fill(1));
    const bigStep = step({ slmHiddenState: new Array(20_000).fill(0.5) });
    const cases: [string, Buffer[], keyof typeof grpc.status, string][] = [
      ['empty prompt (no context)', [open([])], 'INVALID_ARGUMENT', 'open needs the context: at least one token id'],
      ['1 MB prompt', [oneMb], 'RESOURCE_EXHAUSTED', `Received message larger than max (${oneMb.length} vs ${MAX_MESSAGE_BYTES})`],
      ['prompt longer than the context window', [open(new Array(600).fill(1))], 'OUT_OF_RANGE', "context of 600 tokens exceeds the model's window of 512"],
      [
        'a step that would generate past the window',
        [open(new Array(511).fill(1)), step({ offset: 511, ids: [403], sources: ['TOKEN_SOURCE_SLM'] })],
        'OUT_OF_RANGE',
        "context of 512 tokens fills the model's window of 512: no position is left to generate",
      ],
      ['threshold NaN', [open([1]), step({ threshold: Number.NaN })], 'INVALID_ARGUMENT', 'threshold must be in [0, 1], got NaN'],
      ['threshold negative', [open([1]), step({ threshold: -0.5 })], 'INVALID_ARGUMENT', 'threshold must be in [0, 1], got -0.5'],
      ['threshold above 1', [open([1]), step({ threshold: 1.5 })], 'INVALID_ARGUMENT', 'threshold must be in [0, 1], got 1.5'],
      [
        'threshold not a number (a string on the wire)',
        [open([1]), Buffer.from([0x12, 0x05, 0x3a, 0x03, ...Buffer.from('abc')])],
        'INVALID_ARGUMENT',
        'malformed RouteRequest: field threshold (7) has wire type 2; its type float needs 5',
      ],
      ['router score NaN', [open([1]), step({ routerScore: Number.NaN })], 'INVALID_ARGUMENT', 'router_score must be a finite number, got NaN'],
      ['max tokens huge', [open([1]), step({ maxTokens: 4_294_967_295 })], 'INVALID_ARGUMENT', "max_tokens 4294967295 is above this shim's limit of 64"],
      [
        'token ids outside the vocabulary: open',
        [open([1, 512])],
        'INVALID_ARGUMENT',
        'context_ids holds token id 512 (index 1), outside the vocabulary [0, 512)',
      ],
      [
        'token ids outside the vocabulary: step',
        [open([1]), step({ ids: [99_999], sources: ['TOKEN_SOURCE_SLM'] })],
        'INVALID_ARGUMENT',
        'the step holds token id 99999 (index 0), outside the vocabulary [0, 512)',
      ],
      ['unknown session (a step with no open)', [step({})], 'FAILED_PRECONDITION', 'the first message of a stream must be `open`'],
      [
        'an extend with no open',
        [extend({ offset: 0, ids: [403], sources: ['TOKEN_SOURCE_SLM'] })],
        'FAILED_PRECONDITION',
        'the first message of a stream must be `open`',
      ],
      ['an empty extend', [open([1]), extend({ offset: 1 })], 'INVALID_ARGUMENT', 'an extend needs at least one token id'],
      [
        'an extend with fewer sources than ids',
        [open([1]), extend({ offset: 1, ids: [403, 261], sources: ['TOKEN_SOURCE_SLM'] })],
        'INVALID_ARGUMENT',
        'an extend has 2 ids but 1 sources',
      ],
      [
        'token ids outside the vocabulary: extend',
        [open([1]), extend({ offset: 1, ids: [512], sources: ['TOKEN_SOURCE_SLM'] })],
        'INVALID_ARGUMENT',
        'the extend holds token id 512 (index 0), outside the vocabulary [0, 512)',
      ],
      [
        'an extend with a prompt token',
        [open([1]), extend({ offset: 1, ids: [403], sources: ['TOKEN_SOURCE_PROMPT'] })],
        'INVALID_ARGUMENT',
        'sources[0] is TOKEN_SOURCE_PROMPT: a step or extend carries generated tokens only (slm, llm, fallback); prompt tokens belong in open.context_ids',
      ],
      [
        'an extend past the window',
        [open(new Array(500).fill(1)), extend({ offset: 500, ids: new Array(12).fill(403), sources: new Array(12).fill('TOKEN_SOURCE_SLM') })],
        'OUT_OF_RANGE',
        "context of 512 tokens fills the model's window of 512: no position is left to generate",
      ],
      [
        'an extend with a gap',
        [open([1]), extend({ offset: 3, ids: [403], sources: ['TOKEN_SOURCE_SLM'] })],
        'FAILED_PRECONDITION',
        'gap in context ids: the step or extend starts at offset 3, the session holds 1 tokens',
      ],
      [
        'routing key with a line break',
        [wire({ open: { requestId: 'r', routingKey: 'chat\r\nX-Evil: 1', contextIds: [1] } })],
        'INVALID_ARGUMENT',
        'routing_key must be printable ASCII (a header value); character 4 is U+000D',
      ],
      [
        'routing key too long',
        [wire({ open: { requestId: 'r', routingKey: 'k'.repeat(201), contextIds: [1] } })],
        'INVALID_ARGUMENT',
        'routing_key is 201 characters; the limit is 200',
      ],
      [
        'request id (the routing key) not ASCII',
        [open([1], 'rüd')],
        'INVALID_ARGUMENT',
        'request_id (the routing key when routing_key is empty) must be printable ASCII (a header value); character 1 is U+00FC',
      ],
      [
        'invalid UTF-8 in request_id',
        [Buffer.from([0x0a, requestId.length + contextIds.length, ...requestId, ...contextIds])],
        'INVALID_ARGUMENT',
        'malformed RouteRequest: field requestId (1) is not valid UTF-8',
      ],
      ['malformed protobuf: garbage', [Buffer.from([0xff, 0xff, 0xff])], 'INVALID_ARGUMENT', 'malformed RouteRequest: truncated varint at byte 0'],
      [
        'malformed protobuf: a nested length past the end',
        [Buffer.from([0x0a, 0x02, 0x1a, 0x05])],
        'INVALID_ARGUMENT',
        'malformed RouteRequest: field contextIds (3) at byte 4 needs 5 bytes, 0 left',
      ],
      [
        'malformed protobuf after a good open',
        [open([1]), Buffer.from([0x12, 0x01, 0x0f])],
        'INVALID_ARGUMENT',
        'malformed RouteRequest: invalid wire type 7 at byte 2',
      ],
      [
        'a step above the size limit',
        [open([1]), bigStep],
        'RESOURCE_EXHAUSTED',
        `Received message larger than max (${bigStep.length} vs ${MAX_MESSAGE_BYTES})`,
      ],
    ];
    const outcomes: Outcome[] = [];
    for (const [name, messages] of cases) outcomes.push(await outcome(name, messages));

    // An expired session: opened, then left idle past the limit; the shim ends its stream.
    outcomes.push(await outcome('expired session', [open([1])], true));

    // Too many concurrent generations: the session cap (2) is full.
    const holders = [route([open([1], 'hold-1')], true), route([open([1], 'hold-2')], true)];
    await waitFor(() => holders.every((h) => h.responses.length === 1), 10_000, 'two sessions open');
    outcomes.push(await outcome('too many concurrent sessions', [open([1])]));
    for (const h of holders) h.end();
    for (const h of holders) expect((await h.status).code).toBe(grpc.status.OK);

    expect(outcomes).toEqual([
      ...cases.map(([name, , status, text]) => expected(name, status, text)),
      expected('expired session', 'DEADLINE_EXCEEDED', `session idle for more than ${IDLE_MS} ms`),
      expected('too many concurrent sessions', 'RESOURCE_EXHAUSTED', 'too many sessions: the shim serves at most 2 at once'),
    ]);

    const ok = route([open([1]), step({ maxTokens: 2 })]);
    expect((await ok.status).code).toBe(grpc.status.OK);
    expect(ok.responses.map((r) => r.message)).toEqual(['opened', 'step', 'end']);
    expect(ok.responses[1]!.step!.ids).toEqual([403, 407]);
    await waitFor(() => shim.store.count === 0, 5_000, 'sessions to close');
  });
});

describe('cloud shim Score', () => {
  const TOKEN = 'score-secret';
  let shim: ShimServer;
  let client: CloudRouterClientType;

  beforeAll(async () => {
    shim = await startTestShim({ authToken: TOKEN });
    client = new CloudRouterClient(shim.address, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client.close();
    await shim.shutdown();
  });

  /** `token` null: the call carries no authorization metadata. */
  function score(request: Partial<ScoreRequest>, token: string | null = TOKEN): Promise<{ status: string; message: string; positions: number }> {
    const metadata = new grpc.Metadata();
    if (token !== null) metadata.set('authorization', `Bearer ${token}`);
    return new Promise((resolve) => {
      client.Score({ ids: [1, 403], ...request }, metadata, { deadline: Date.now() + 20_000 }, (error, reply) =>
        resolve(
          error ? { status: grpc.status[error.code], message: error.details, positions: 0 } : { status: 'OK', message: '', positions: reply!.positions.length },
        ),
      );
    });
  }

  test('the whole matrix gets specific statuses with messages; then a normal call succeeds', async () => {
    const cases: [string, Partial<ScoreRequest>, string | null, keyof typeof grpc.status, string][] = [
      ['no token', {}, null, 'UNAUTHENTICATED', 'missing bearer token'],
      ['a wrong token', {}, 'nope', 'UNAUTHENTICATED', 'invalid bearer token'],
      ['one id', { ids: [1] }, TOKEN, 'INVALID_ARGUMENT', 'a sequence to score needs 2 ids or more (one position predicting the next), got 1'],
      ['no ids', { ids: [] }, TOKEN, 'INVALID_ARGUMENT', 'a sequence to score needs 2 ids or more'],
      [
        'longer than the window',
        { ids: new Array(513).fill(1) },
        TOKEN,
        'OUT_OF_RANGE',
        "the sequence is 513 tokens, above the cloud model's window of 512: score it in windows of at most 512",
      ],
      ['an id outside the vocabulary', { ids: [1, 512] }, TOKEN, 'INVALID_ARGUMENT', "ids[1] is 512, outside the cloud model's vocabulary [0, 512)"],
      [
        'candidates of the wrong length',
        { ids: [1, 403, 9], candidateIds: [5] },
        TOKEN,
        'INVALID_ARGUMENT',
        'candidate_ids must hold one id per position (2) or none, got 1',
      ],
      [
        'a candidate outside the vocabulary',
        { ids: [1, 403], candidateIds: [9999] },
        TOKEN,
        'INVALID_ARGUMENT',
        "candidate_ids[0] is 9999, outside the cloud model's vocabulary [0, 512)",
      ],
      ['top_k above 20', { topK: 21 }, TOKEN, 'INVALID_ARGUMENT', 'top_k must be at most 20, got 21'],
      ['a request id of 100,000 characters', { requestId: 'r'.repeat(100_000) }, TOKEN, 'INVALID_ARGUMENT', 'request_id is longer than 200 characters'],
    ];
    const seen: Outcome[] = [];
    for (const [name, request, token] of cases) {
      const r = await score(request, token);
      seen.push({ name, status: r.status, message: r.message });
    }
    expect(seen).toEqual(cases.map(([name, , , status, message]) => expected(name, status, message)));
    expect(await score({ ids: [1, 403, 9], candidateIds: [403, 9], topK: 3, requestId: 'r'.repeat(200) })).toEqual({ status: 'OK', message: '', positions: 2 });
  });
});

describe('gRPC health service names (edge and shim)', () => {
  let edgeServer: EdgeGrpcServer;
  let shim: ShimServer;
  const clients: InstanceType<typeof HealthClient>[] = [];

  beforeAll(async () => {
    edgeServer = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, maxReceiveBytes: MAX_BODY_BYTES });
    const edgePort = await edgeServer.start();
    shim = await startTestShim();
    clients.push(
      new HealthClient(`127.0.0.1:${edgePort}`, grpc.credentials.createInsecure()),
      new HealthClient(shim.address, grpc.credentials.createInsecure()),
    );
  });

  afterAll(async () => {
    for (const client of clients) client.close();
    await edgeServer.shutdown(1000);
    await shim.shutdown();
  });

  function check(client: InstanceType<typeof HealthClient>, service: string): Promise<{ status: string; message: string }> {
    return new Promise((resolve) =>
      client.Check({ service }, { deadline: Date.now() + 10_000 }, (err, res) =>
        resolve(err ? { status: grpc.status[err.code], message: err.details } : { status: 'OK', message: String(res?.status) }),
      ),
    );
  }

  function watch(client: InstanceType<typeof HealthClient>, service: string): Promise<{ status: string; message: string }> {
    const call = client.Watch({ service }, { deadline: Date.now() + 10_000 });
    call.on('data', () => call.cancel());
    call.on('error', () => {});
    return new Promise((resolve) => call.on('status', (s: grpc.StatusObject) => resolve({ status: grpc.status[s.code], message: s.details })));
  }

  test('long names get INVALID_ARGUMENT with their length, unknown ones NOT_FOUND; then the real names answer SERVING', async () => {
    const names = [
      ['8,000 characters', 'x'.repeat(8_000), 'INVALID_ARGUMENT', `service name is 8000 characters; the limit is ${MAX_SERVICE_NAME_CHARS}`],
      ['100,000 characters', 'x'.repeat(100_000), 'INVALID_ARGUMENT', `service name is 100000 characters; the limit is ${MAX_SERVICE_NAME_CHARS}`],
      ['one past the limit', 'x'.repeat(MAX_SERVICE_NAME_CHARS + 1), 'INVALID_ARGUMENT', `service name is ${MAX_SERVICE_NAME_CHARS + 1} characters`],
      ['unknown, at the limit', 'x'.repeat(MAX_SERVICE_NAME_CHARS), 'NOT_FOUND', `unknown service "${'x'.repeat(MAX_SERVICE_NAME_CHARS)}"`],
    ] as const;
    const outcomes: Outcome[] = [];
    for (const [server, client] of [
      ['edge', clients[0]!],
      ['shim', clients[1]!],
    ] as const) {
      for (const [name, service] of names) outcomes.push({ name: `${server}: Check, ${name}`, ...(await check(client, service)) });
      for (const [name, service] of names.slice(0, 2)) outcomes.push({ name: `${server}: Watch, ${name}`, ...(await watch(client, service)) });
    }
    expect(outcomes).toEqual(
      ['edge', 'shim'].flatMap((server) => [
        ...names.map(([name, , status, message]) => expected(`${server}: Check, ${name}`, status, message)),
        ...names.slice(0, 2).map(([name, , status, message]) => expected(`${server}: Watch, ${name}`, status, message)),
      ]),
    );
    expect(await check(clients[0]!, EDGE_GENERATOR_SERVICE_NAME)).toEqual({ status: 'OK', message: 'SERVING' });
    expect(await check(clients[1]!, CLOUD_ROUTER_SERVICE_NAME)).toEqual({ status: 'OK', message: 'SERVING' });
  });
});
