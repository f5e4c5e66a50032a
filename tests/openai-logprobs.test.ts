/**
 * OpenAI's `logprobs` on both endpoints, through the official client against the chat pair's edge and a real
 * shim: chat's `logprobs.content` (streamed and not) and completions' parallel lists carry the figures the
 * edge's own API reports for the same greedy generation, from whichever model chose each token.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { DEFAULT_EDGE_CONFIG } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { CHAT_DEMO } from '../src/shared/paths.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { readSse } from './helpers/sse-client.ts';

const KEY = 'edge-test-key';
const MODEL = 'stories260k-chat-distilled-1l';
/** Routes part of the tokens: both models' figures show up. */
const ROUTING = { routing_threshold: 0.7, temperature: 0, seed: 1 };

let shim: ShimServer;
let edge: RunningEdge;
let client: OpenAI;
let base: string;

beforeAll(async () => {
  await ensureDemoPacks();
  const backend = await EmbeddedBackend.load({ modelPack: CHAT_DEMO.cloudPack, maxLiveSequences: 8 });
  shim = await startTestShim({}, { backend });
  edge = await startEdge({
    ...DEFAULT_EDGE_CONFIG,
    host: '127.0.0.1',
    port: 0,
    grpcPort: -1,
    edgeModel: CHAT_DEMO.edgePack,
    router: CHAT_DEMO.routerPack,
    cloud: shim.address,
    accessToken: KEY,
  });
  base = edge.url.replace(/\/$/, '');
  client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await edge?.stop();
  await shim?.shutdown(1000);
});

type NativeToken = { id: number; source: string; logprob: number | null; top_logprobs: { id: number; logprob: number }[] };

/** The edge's own API for the same prompt: its token events' figures. */
async function nativeTokens(prompt: string, maxNewTokens: number, logprobs: number): Promise<NativeToken[]> {
  const res = await fetch(`${base}/api/generate`, {
    method: 'POST',
    body: JSON.stringify({ prompt, max_new_tokens: maxNewTokens, logprobs, threshold: ROUTING.routing_threshold, temperature: 0 }),
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
  });
  const stream = readSse(res);
  await stream.ended;
  return stream.events.filter((e) => e.event === 'token').map((e) => JSON.parse(e.data) as NativeToken);
}

type Entry = { token: string; logprob: number | null; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] };

/** At temperature 0 either model took its most likely token: the first alternative is the token itself. */
function expectGreedy(entries: readonly Entry[], top: number) {
  for (const e of entries) {
    expect(e.top_logprobs.length).toBe(top);
    expect(e.top_logprobs[0]!.bytes).toEqual(e.bytes);
    expect(e.logprob!).toBeCloseTo(e.top_logprobs[0]!.logprob, 6);
    const values = e.top_logprobs.map((t) => t.logprob);
    expect(values).toEqual([...values].sort((a, b) => b - a));
  }
}

describe('chat completions', () => {
  const messages = [{ role: 'user' as const, content: 'Tell me about a little dog.' }];
  // The chat router is sure of itself on a story: a share budget routes part of the reply all the same.
  const ROUTING = { route_share: 0.4, temperature: 0, seed: 1 };

  test('logprobs.content: one entry per token, its bytes spelling the reply, the top alternatives in order', async () => {
    const reply = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 16, logprobs: true, top_logprobs: 3, ...ROUTING } as never);
    const choice = (reply as OpenAI.ChatCompletion).choices[0]!;
    const entries = choice.logprobs!.content as Entry[];
    expect(entries.length).toBe((reply as OpenAI.ChatCompletion).usage!.completion_tokens);
    expectGreedy(entries, 3);
    expect(new TextDecoder().decode(Uint8Array.from(entries.flatMap((e) => e.bytes)))).toBe(choice.message.content!);
    expect((reply as unknown as { usage: { routed_tokens: number } }).usage.routed_tokens).toBeGreaterThan(0);
  });

  test('streamed: each token’s chunk carries its entry, and they match the whole reply', async () => {
    const request = { model: MODEL, messages, max_tokens: 16, logprobs: true, top_logprobs: 2, ...ROUTING };
    const whole = (await client.chat.completions.create(request as never)) as OpenAI.ChatCompletion;
    const stream = await client.chat.completions.create({ ...request, stream: true } as never);
    const streamed: Entry[] = [];
    const sources = new Set<string>();
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & { choices: { routing?: { source: string } }[] }>) {
      const choice = chunk.choices[0];
      if (!choice?.routing) continue;
      sources.add(choice.routing.source);
      expect(choice.logprobs!.content!.length).toBe(1);
      streamed.push(choice.logprobs!.content![0] as Entry);
    }
    // The same tokens and alternatives; the figures to float32 rounding (the second request's prompt is the edge's and
    // the shim's cache, prefilled in other pieces).
    const entries = whole.choices[0]!.logprobs!.content as Entry[];
    const shape = (list: Entry[]) => list.map((e) => ({ token: e.token, bytes: e.bytes, top: e.top_logprobs.map((t) => t.token) }));
    expect(shape(streamed)).toEqual(shape(entries));
    streamed.forEach((e, i) => expect(e.logprob!).toBeCloseTo(entries[i]!.logprob!, 1));
    expect([...sources].sort()).toEqual(['llm', 'slm']);
  });

  test('not asked: logprobs null', async () => {
    const reply = (await client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, ...ROUTING } as never)) as OpenAI.ChatCompletion;
    expect(reply.choices[0]!.logprobs).toBeNull();
  });
});

describe('completions', () => {
  const prompt = 'Once upon a time, there was a little dog';

  test('tokens, token_logprobs, top_logprobs, text_offset: the edge API’s figures for the same generation', async () => {
    const reply = (await client.completions.create({ model: MODEL, prompt, max_tokens: 12, logprobs: 2, ...ROUTING } as never)) as OpenAI.Completion;
    const choice = reply.choices[0]!;
    const lp = choice.logprobs!;
    const native = await nativeTokens(prompt, 12, 2);
    expect(lp.token_logprobs!.length).toBe(native.length);
    // To float32 rounding: the second request finds the prompt in the edge's and the shim's caches.
    native.forEach((t, i) => {
      expect(lp.token_logprobs![i]!).toBeCloseTo(t.logprob!, 1);
      const values = Object.values(lp.top_logprobs![i]!);
      expect(values.length).toBe(t.top_logprobs.length);
      values.forEach((v, k) => expect(v).toBeCloseTo(t.top_logprobs[k]!.logprob, 1));
    });
    expect(new Set(native.map((t) => t.source))).toEqual(new Set(['slm', 'llm']));
    expect(lp.tokens!.join('')).toBe(choice.text);
    expect(lp.text_offset![0]).toBe(0);
    lp.text_offset!.forEach((at, i) => expect(choice.text.startsWith(lp.tokens![i]!, at)).toBe(true));
  });
});

describe('bad input', () => {
  const post = (path: string, body: Record<string, unknown>) =>
    fetch(`${base}/v1/${path}`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, ...body }),
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    });

  test.each([
    ['chat/completions', { messages: [{ role: 'user', content: 'hi' }], top_logprobs: 2 }, 'top_logprobs', /needs logprobs: true/],
    ['chat/completions', { messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 21 }, 'top_logprobs', /top_logprobs/],
    ['chat/completions', { messages: [{ role: 'user', content: 'hi' }], logprobs: 'yes' }, 'logprobs', /logprobs/],
    ['completions', { prompt: 'Once', logprobs: 21 }, 'logprobs', /logprobs/],
    ['completions', { prompt: 'Once', logprobs: true }, 'logprobs', /logprobs/],
  ])('%s %j: 400 naming %s', async (path, body, param, message) => {
    const res = await post(path, body);
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { param: string; message: string } };
    expect(error.param).toBe(param);
    expect(error.message).toMatch(message);
  });
});
