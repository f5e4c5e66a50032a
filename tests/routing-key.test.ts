/**
 * The routing key, end to end: edge request (`conversation`, OpenAI's `prompt_cache_key`) → edge cloud client
 * (`open.routing_key`) → shim session → SGLang backend (`X-SMG-Routing-Key` header and the body's
 * `routing_key`), against the fake SGLang server, which records both. What a gateway in front of several
 * SGLang workers needs: every step of a generation carries one key, generations of one conversation share
 * it, a generation without one is keyed by its request id, and a reopened stream keeps the key. The key the
 * cloud reads is an HMAC of the caller's conversation made on the box: the caller's text never leaves it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { Hono } from 'hono';
import type { ShimConfig } from '../src/cloud/config.ts';
import { sessionRoutingKey } from '../src/cloud/sessions/session-routing-key.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { EdgeGrpcServer } from '../src/edge/grpc/edge-grpc-server.ts';
import { EdgeGeneratorClient, type GenerateEvent__Output } from '../src/edge/grpc/edge-proto.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { AppError } from '../src/shared/errors.ts';
import { CONVERSATION_MAX_CHARS, routingKeyProblem } from '../src/shared/contract/routing-key.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { FakeSglang } from './helpers/cloud-fake-sglang.ts';
import { EdgeContext, loadCloudModel, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';
import { RoutingKeyHash } from '../src/edge/cloud/routing-key-hash.ts';

/** The edge derives the key the cloud reads from the caller's conversation (routing-key-hash.ts): the same one each time. */
const SECRET = 'routing-key-test';
const hashed = (conversation: string) => new RoutingKeyHash(SECRET).of(conversation);

let model: DecoderModel;
let tokenizer: TextTokenizer;

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
}, 30_000);
afterAll(() => model.release());

/** The key of each /generate request the fake received, as its header and its body said. */
function keys(fake: FakeSglang): { header: (string | null)[]; body: unknown[] } {
  return { header: [...fake.routingKeys], body: fake.requests.map((r) => r.routing_key) };
}

/** The shim session behind each /generate request: its rid is `<session id>-<step>`. */
function sessions(fake: FakeSglang): string[] {
  return fake.requests.map((r) => String(r.rid).split('-')[0]!);
}

describe('routing key checks', () => {
  test('a key is 1 to max printable ASCII characters; the message names the field and the character', () => {
    expect(routingKeyProblem('chat-42 ~!', 'conversation', CONVERSATION_MAX_CHARS)).toBeUndefined();
    expect(routingKeyProblem('c'.repeat(128), 'conversation', CONVERSATION_MAX_CHARS)).toBeUndefined();
    expect(routingKeyProblem('', 'conversation', 128)).toBe('conversation must not be empty');
    expect(routingKeyProblem('c'.repeat(129), 'conversation', 128)).toBe('conversation is 129 characters; the limit is 128');
    expect(routingKeyProblem('ab\x7f', 'k', 128)).toBe('k must be printable ASCII (a header value); character 2 is U+007F');
    // Counted in characters, not UTF-16 units: the emoji is character 1, and so is what follows it at 2.
    expect(routingKeyProblem('a😀', 'k', 128)).toBe('k must be printable ASCII (a header value); character 1 is U+1F600');
  });

  test('the shim keys a session by routing_key, else by request_id, and refuses either when it cannot be a header value', () => {
    expect(sessionRoutingKey({ requestId: 'r1', routingKey: '' })).toBe('r1');
    expect(sessionRoutingKey({ requestId: 'r1', routingKey: 'chat-42' })).toBe('chat-42');
    expect(sessionRoutingKey({ requestId: '', routingKey: '' })).toBe('');
    expect(() => sessionRoutingKey({ requestId: 'r1', routingKey: 'a\tb' })).toThrow(
      new AppError('INVALID_ARGUMENT', 'routing_key must be printable ASCII (a header value); character 1 is U+0009'),
    );
    // A request id that would be fine as an id but not as a header is refused only when it serves as the key.
    expect(() => sessionRoutingKey({ requestId: 'ré', routingKey: '' })).toThrow(
      'request_id (the routing key when routing_key is empty) must be printable ASCII',
    );
    expect(sessionRoutingKey({ requestId: 'ré', routingKey: 'chat-42' })).toBe('chat-42');
  });
});

describe('shim → SGLang', () => {
  /** A fake SGLang, a shim in front of it and an edge cloud client; all torn down afterwards. */
  async function withShim(shimOptions: Partial<ShimConfig>, fn: (ctx: { fake: FakeSglang; shim: ShimServer; client: GrpcCloudClient }) => Promise<void>) {
    const fake = new FakeSglang(model, tokenizer);
    const shim = await startTestShim({ backend: 'sglang', backendUrl: fake.url, ...shimOptions });
    const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000, routingKeySecret: SECRET });
    try {
      await fn({ fake, shim, client });
    } finally {
      await client.close();
      await shim.shutdown();
      await fake.stop();
    }
  }

  /** `steps` routed steps of one generation, an edge token between each; returns the cached tokens per step. */
  async function generation(client: GrpcCloudClient, options: { requestId: string; routingKey?: string }, steps: number): Promise<number[]> {
    const edge = new EdgeContext([1, 403]);
    const conversation = client.openConversation({ ...options, gate: CloudGate.OPEN });
    const cached: number[] = [];
    try {
      for (let i = 0; i < steps; i++) {
        const reply = await conversation.next(edge.step());
        cached.push(reply.cachedTokens);
        edge.push(reply.tokens, 'llm');
        edge.push([261], 'slm');
      }
    } finally {
      await conversation.close();
    }
    return cached;
  }

  test('every step of a generation carries its conversation as header and body; a second generation of it the same', async () => {
    await withShim({}, async ({ fake, client }) => {
      await generation(client, { requestId: 'gen-1', routingKey: 'chat-42' }, 3);
      await generation(client, { requestId: 'gen-2', routingKey: 'chat-42' }, 2);
      expect(keys(fake)).toEqual({ header: new Array(5).fill(hashed('chat-42')), body: new Array(5).fill(hashed('chat-42')) });
      // Two shim sessions, each step its own SGLang request id: the key, not the rid, is what stays.
      expect(new Set(sessions(fake)).size).toBe(2);
      expect(new Set(fake.requests.map((r) => r.rid)).size).toBe(5);
    });
  });

  test('without a conversation the key is the request id: one per generation', async () => {
    await withShim({}, async ({ fake, client }) => {
      await generation(client, { requestId: 'gen-7' }, 2);
      await generation(client, { requestId: 'gen-8' }, 2);
      expect(keys(fake)).toEqual({ header: ['gen-7', 'gen-7', 'gen-8', 'gen-8'], body: ['gen-7', 'gen-7', 'gen-8', 'gen-8'] });
    });
  });

  test('a stream the shim expired is reopened with the whole context and the same key', async () => {
    await withShim({ sessionIdleMs: 300 }, async ({ fake, shim, client }) => {
      const edge = new EdgeContext([1, 403]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'gen-3' });
      try {
        const first = await conversation.next(edge.step());
        edge.push(first.tokens, 'llm');
        edge.push([261], 'slm');
        await waitFor(() => shim.store.count === 0, 5_000, 'the idle session to expire');
        const second = await conversation.next(edge.step());
        // The new stream's open carried the whole context, and the fake's cache still held its prefix.
        expect(fake.requests[1]!.input_ids).toEqual(edge.ids);
        expect(second.cachedTokens).toBe(edge.ids.length - 1);
      } finally {
        await conversation.close();
      }
      expect(new Set(sessions(fake)).size).toBe(2);
      expect(keys(fake)).toEqual({ header: ['gen-3', 'gen-3'], body: ['gen-3', 'gen-3'] });
    });
  });

  test('a stream that failed is reopened with the same key; a cancelled step is aborted under it too', async () => {
    await withShim({}, async ({ fake, client }) => {
      const edge = new EdgeContext([1, 403]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'gen-4', routingKey: 'chat-9' });
      try {
        const first = await conversation.next(edge.step());
        edge.push(first.tokens, 'llm');
        fake.options = { httpError: { status: 503, body: { detail: 'worker restarting' } } };
        // The shim ends the stream as UNAVAILABLE without answering: the edge resends once on a new stream.
        expect(await rejectionCode(conversation.next(edge.step()))).toBe('UNAVAILABLE');
        expect(fake.requests.length).toBe(3);
        fake.options = {};
        const again = await conversation.next(edge.step());
        expect(again.tokens.length).toBe(1);
      } finally {
        await conversation.close();
      }

      // Another turn of the chat, cancelled while SGLang computes it: the abort goes where the request went.
      fake.options = { hang: true };
      const controller = new AbortController();
      const cancelled = client.openConversation({ gate: CloudGate.OPEN, requestId: 'gen-5', routingKey: 'chat-9', signal: controller.signal });
      const pending = cancelled.next(new EdgeContext([1, 403]).step());
      await waitFor(() => fake.requests.length === 5, 5_000, 'the cancelled turn to reach the fake');
      controller.abort();
      expect(await rejectionCode(pending)).toBe('CANCELLED');
      await waitFor(() => fake.aborts.length === 1, 5_000, 'the abort request');
      await cancelled.close();

      // Three streams of gen-4 (the first two failed) and one of gen-5: one key throughout.
      expect(new Set(sessions(fake)).size).toBe(4);
      expect(keys(fake)).toEqual({ header: new Array(5).fill(hashed('chat-9')), body: new Array(5).fill(hashed('chat-9')) });
      expect(fake.abortRoutingKeys).toEqual([hashed('chat-9')]);
    });
  });
});

describe('edge APIs → shim → SGLang', () => {
  let fake: FakeSglang;
  let shim: ShimServer;
  let edge: TestEdge;
  let app: Hono;

  beforeAll(async () => {
    fake = new FakeSglang(model, tokenizer);
    shim = await startTestShim({ backend: 'sglang', backendUrl: fake.url });
    edge = await startTestEdge({ cloud: () => new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000, routingKeySecret: SECRET }) });
    app = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024 });
  }, 60_000);

  afterAll(async () => {
    await edge.release();
    await shim.shutdown();
    await fake.stop();
  });

  const post = (path: string, body: unknown) =>
    app.request(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  /** The keys of the requests the fake received while `fn` ran. */
  async function keysDuring(fn: () => Promise<void>): Promise<{ header: (string | null)[]; body: unknown[] }> {
    const from = fake.requests.length;
    await fn();
    const all = keys(fake);
    return { header: all.header.slice(from), body: all.body.slice(from) };
  }

  test('the key is an HMAC of the conversation under the box secret: the same for one conversation, another for another secret, never the text', () => {
    const key = hashed('ann@example.org');
    expect(key).toMatch(/^rk-[A-Za-z0-9_-]{22}$/);
    expect(hashed('ann@example.org')).toBe(key);
    expect(hashed('bob@example.org')).not.toBe(key);
    expect(new RoutingKeyHash('another box').of('ann@example.org')).not.toBe(key);
    expect(routingKeyProblem(key, 'routing_key', 200)).toBeUndefined();
  });

  test("OpenAI's prompt_cache_key names the conversation: two turns of a chat carry it on every routed token", async () => {
    const turn = (prompt: string) =>
      post('/v1/completions', { model: 'stories260k-distilled-1l', prompt, max_tokens: 3, routing_mode: 'llm_only', prompt_cache_key: 'chat-77' });
    const seen = await keysDuring(async () => {
      for (const prompt of ['Once upon a time', 'Once upon a time there was a cat']) {
        const res = await turn(prompt);
        expect(res.status).toBe(200);
      }
    });
    expect(seen.header.length).toBe(6);
    expect(seen).toEqual({ header: new Array(6).fill(hashed('chat-77')), body: new Array(6).fill(hashed('chat-77')) });
  });

  test("the JSON API's conversation is the key; without it each generation's request id is", async () => {
    const named = await keysDuring(async () => {
      await (await post('/api/generate', { prompt: 'Once upon a time', mode: 'llm_only', max_new_tokens: 2, conversation: 'kiosk-3/visitor-12' })).text();
    });
    expect(named).toEqual({ header: new Array(2).fill(hashed('kiosk-3/visitor-12')), body: new Array(2).fill(hashed('kiosk-3/visitor-12')) });

    const requestIds: string[] = [];
    const unnamed = await keysDuring(async () => {
      for (let i = 0; i < 2; i++) {
        const text = await (await post('/api/generate', { prompt: 'Once upon a time', mode: 'llm_only', max_new_tokens: 2 })).text();
        const done = text.split('\n\n').find((block) => block.startsWith('event: done'))!;
        requestIds.push((JSON.parse(done.split('\ndata: ')[1]!) as { request_id: string }).request_id);
      }
    });
    expect(new Set(requestIds).size).toBe(2);
    expect(unnamed.header).toEqual([requestIds[0], requestIds[0], requestIds[1], requestIds[1]]);
    expect(unnamed.body).toEqual(unnamed.header);
  });

  test("gRPC Generate's conversation is the key", async () => {
    const server = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, maxReceiveBytes: 64 * 1024 });
    const client = new EdgeGeneratorClient(`127.0.0.1:${await server.start()}`, grpc.credentials.createInsecure());
    try {
      const seen = await keysDuring(async () => {
        const call = client.Generate(
          { prompt: 'Once upon a time', mode: 'llm_only', maxNewTokens: 2, conversation: 'lan-app:7' },
          { deadline: Date.now() + 30_000 },
        );
        const events: GenerateEvent__Output[] = [];
        for await (const event of call) events.push(event as GenerateEvent__Output);
        expect(events.map((e) => e.event)).toEqual(['token', 'token', 'done']);
      });
      expect(seen).toEqual({ header: new Array(2).fill(hashed('lan-app:7')), body: new Array(2).fill(hashed('lan-app:7')) });
    } finally {
      client.close();
      await server.shutdown(1000);
    }
  });
});
