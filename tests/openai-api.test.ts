/**
 * The OpenAI-compatible API driven by the official `openai` client against a real edge (startEdge: Bun's
 * HTTP server on a loopback port, the trained router, a chat-capable copy of the demo edge pack) and a
 * real shim (gRPC on loopback, the embedded 5-layer cloud model, slowed a little per step so that a
 * generation can be caught running). Greedy decoding makes every text exact: each is compared with the
 * edge's own /api/generate for the same prompt and settings, or with the reference greedy story.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { Backend } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { DEFAULT_EDGE_CONFIG } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { ChatTemplate } from '../src/shared/text/chat-template.ts';
import { DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { makeChatPack } from './helpers/chat-pack.ts';
import { cloudPackDir, startTestShim } from './helpers/cloud-fixture.ts';
import { readSse } from './helpers/sse-client.ts';

const KEY = 'edge-test-key';
const MODEL = 'stories260k-3l-chat';
const STEP_DELAY_MS = 10;

/** The embedded backend, slowed down per step, so that a long llm_only generation is still running when the test acts. */
function slowBackend(inner: Backend, delayMs: number): Backend {
  return {
    info: inner.info,
    openSequence(id) {
      const sequence = inner.openSequence(id);
      return {
        async step(request) {
          await Bun.sleep(delayMs);
          return sequence.step(request);
        },
        dispose: () => sequence.dispose(),
      };
    },
    close: () => inner.close(),
  };
}

let pack: Awaited<ReturnType<typeof makeChatPack>>;
let shim: ShimServer;
let edge: RunningEdge;
let client: OpenAI;
let tokenizer: TextTokenizer;
let base: string;

beforeAll(async () => {
  pack = await makeChatPack();
  tokenizer = await TextTokenizer.fromPack(pack.dir);
  const backend = await EmbeddedBackend.load({ modelPack: await cloudPackDir(), maxLiveSequences: 8 });
  shim = await startTestShim({}, { backend: slowBackend(backend, STEP_DELAY_MS) });
  edge = await startEdge({
    ...DEFAULT_EDGE_CONFIG,
    host: '127.0.0.1',
    port: 0,
    grpcPort: -1,
    edgeModel: pack.dir,
    router: DEMO.routerPack,
    cloud: shim.address,
    accessToken: KEY,
    maxConcurrent: 2,
    logLevel: 'error',
  });
  base = edge.url.replace(/\/$/, '');
  client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await edge?.stop();
  await shim?.shutdown(1000);
  pack?.remove();
});

/** The edge's own API for the same request: the reference every OpenAI answer is compared with. */
async function nativeText(request: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${base}/api/generate`, {
    method: 'POST',
    body: JSON.stringify(request),
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
  });
  const stream = readSse(res);
  await stream.ended;
  const done = stream.events.find((e) => e.event === 'done');
  if (!done) throw new Error(`no done event: ${JSON.stringify(stream.events.at(-1))}`);
  return (JSON.parse(done.data) as { text: string }).text;
}

/** Extension fields the typed client does not declare. */
type Routed = { routing: { token_id: number; source: string; score: number | null } };
type RoutedUsage = { routed_tokens: number; fallback_tokens: number };

async function activeGenerations(): Promise<number> {
  return ((await (await fetch(`${base}/readyz`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { active: number }).active;
}

/** Polls /readyz (one request at a time) until `count` generations are running. */
async function waitForActive(count: number, timeoutMs: number, what: string): Promise<void> {
  const until = performance.now() + timeoutMs;
  while ((await activeGenerations()) !== count) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(5);
  }
}

describe('models', () => {
  test('GET /v1/models lists the edge model', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    expect(models).toEqual([expect.objectContaining({ id: MODEL, object: 'model', owned_by: 'edge', max_model_len: 512 })]);
    expect((await client.models.retrieve(MODEL)).id).toBe(MODEL);
  });
});

describe('completions', () => {
  const prompt = 'Once upon a time';

  test('non-streaming: the same text as the edge API, OpenAI usage plus the routing counts', async () => {
    const reply = await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 12,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const expected = await nativeText({ prompt, mode: 'small_only', max_new_tokens: 12, temperature: 0 });
    const promptTokens = tokenizer.encode(prompt, { addBos: true, parseSpecialTokens: false }).length;
    expect(reply).toMatchObject({ object: 'text_completion', model: MODEL, choices: [{ index: 0, text: expected, finish_reason: 'length', logprobs: null }] });
    expect(reply.id).toStartWith('cmpl-');
    expect(reply.usage).toEqual({
      prompt_tokens: promptTokens,
      completion_tokens: 12,
      total_tokens: promptTokens + 12,
      prompt_tokens_details: { cached_tokens: 0 },
      routed_tokens: 0,
      fallback_tokens: 0,
      routing: { policy: 'threshold', threshold: 0.8, cut: 0.8, mean_cut: 0.8, decided: 0, routed_positions: 0, realized_share: 0, overloaded: 0 },
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
    } as OpenAI.CompletionUsage);

    // The same prompt as token ids (BOS included) continues identically.
    const ids = tokenizer.encode(prompt, { addBos: true, parseSpecialTokens: false });
    const byIds = await client.completions.create({
      model: MODEL,
      prompt: ids,
      max_tokens: 12,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(byIds.choices[0]!.text).toBe(expected);
    expect(byIds.usage!.prompt_tokens).toBe(ids.length);
  });

  test('llm_only from the BOS token: the cloud model writes the reference greedy story, every token routed', async () => {
    const reply = await client.completions.create({
      model: MODEL,
      prompt: [1],
      max_tokens: 24,
      temperature: 0,
      routing_mode: 'llm_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(reply.choices[0]!.text).toStartWith('Once upon a time, there was a little girl named Lily.');
    expect(reply.usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 24, routed_tokens: 24, fallback_tokens: 0 });
  });

  test('a stop string ends the text before it, with finish_reason stop', async () => {
    const full = await nativeText({ prompt, mode: 'small_only', max_new_tokens: 30, temperature: 0 });
    const stop = full.includes(',') ? ',' : '.';
    const reply = await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 30,
      temperature: 0,
      stop: [stop],
      routing_mode: 'small_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(reply.choices[0]).toMatchObject({ text: full.slice(0, full.indexOf(stop)), finish_reason: 'stop' });
  });

  test('streaming with routing extensions: one chunk per token with its source and score, [DONE] after the usage', async () => {
    // The demo router is sure of a story's opening words (scores 0.9–0.999 here): τ 0.99 routes some, keeps others.
    const tau = 0.99;
    const params = { model: MODEL, prompt, max_tokens: 20, temperature: 0, routing_threshold: tau };
    const stream = await client.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.CompletionCreateParamsStreaming);
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const tokens = chunks.filter((c) => c.choices.length === 1 && c.choices[0]!.finish_reason === null);
    expect(tokens).toHaveLength(20);
    const routing = tokens.map((c) => (c.choices[0] as unknown as Routed).routing);
    for (const r of routing) {
      expect(r.score).toBeGreaterThanOrEqual(0);
      expect(r.source).toBe(r.score! < tau ? 'llm' : 'slm');
    }
    const routed = routing.filter((r) => r.source === 'llm').length;
    expect(routed).toBeGreaterThan(0);
    expect(routed).toBeLessThan(20);
    // The ids in the extension are the text's tokens: decoded after the prompt, they give the streamed text.
    const promptIds = tokenizer.encode(prompt, { addBos: true, parseSpecialTokens: false });
    const idsText = tokenizer.decode([...promptIds, ...routing.map((r) => r.token_id)]).slice(tokenizer.decode(promptIds).length);

    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: 20, routed_tokens: routed, fallback_tokens: 0 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('length');
    const streamed = chunks.flatMap((c) => c.choices.map((choice) => choice.text)).join('');
    expect(idsText).toBe(streamed);
    expect(streamed).toBe(await nativeText({ prompt, mode: 'joint', threshold: tau, max_new_tokens: 20, temperature: 0 }));
    const whole = await client.completions.create(params as OpenAI.CompletionCreateParamsNonStreaming);
    expect(whole.choices[0]!.text).toBe(streamed);
    expect((whole.usage as unknown as RoutedUsage).routed_tokens).toBe(routed);
  });
});

describe('chat completions', () => {
  const messages = [
    { role: 'system' as const, content: 'Tell stories.' },
    { role: 'user' as const, content: 'A story about a dog.' },
  ];
  const rendered = '<s>system: Tell stories.\nuser: A story about a dog.\nassistant:';

  test("the pack's template renders the turns; the reply continues exactly those prompt ids", async () => {
    const template = ChatTemplate.ofTokenizer(tokenizer)!;
    expect(template.render(messages)).toBe(rendered);
    const ids = tokenizer.encode(rendered, { addBos: false, parseSpecialTokens: true });
    expect(ids[0]).toBe(1); // <s> written by the template became the BOS id, not its characters

    const reply = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_completion_tokens: 16,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const byIds = await client.completions.create({
      model: MODEL,
      prompt: ids,
      max_tokens: 16,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(reply).toMatchObject({
      object: 'chat.completion',
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: byIds.choices[0]!.text }, finish_reason: 'length' }],
      usage: { prompt_tokens: ids.length, completion_tokens: 16, total_tokens: ids.length + 16, routed_tokens: 0, fallback_tokens: 0 },
    });
    expect(reply.id).toStartWith('chatcmpl-');
  });

  test("a message's special-token text stays text (issue 45, item 3): `</s>` typed by a user is not the EOS id", async () => {
    const typed = [{ role: 'user' as const, content: 'The end.</s> Once' }];
    const template = ChatTemplate.ofTokenizer(tokenizer)!;
    const parsed = tokenizer.encode(template.render(typed), { addBos: false, parseSpecialTokens: true });
    const { ids } = template.encode(typed, tokenizer);
    const eos = tokenizer.eosIds[0]!;
    expect(parsed.filter((id) => id === eos)).toHaveLength(1);
    expect(ids.filter((id) => id === eos)).toHaveLength(0);
    expect(ids[0]).toBe(1); // the template's own <s> is still the BOS id
    // The same ids as transformers' parsing up to the typed `</s>`, then its characters.
    const at = parsed.indexOf(eos);
    expect(ids.slice(0, at)).toEqual(parsed.slice(0, at));
    expect(tokenizer.decode(ids.slice(at), { skipSpecialTokens: false })).toStartWith('</s> Once');

    const reply = await client.chat.completions.create({
      model: MODEL,
      messages: typed,
      max_completion_tokens: 8,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const byIds = await client.completions.create({
      model: MODEL,
      prompt: ids,
      max_tokens: 8,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(reply.usage!.prompt_tokens).toBe(ids.length);
    expect(reply.choices[0]!.message.content).toBe(byIds.choices[0]!.text);
  });

  test('streaming: the role first, then content deltas with routing, the finish, the usage', async () => {
    const params = { model: MODEL, messages, max_tokens: 12, temperature: 0, routing_mode: 'llm_only' };
    const stream = await client.chat.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks[0]!.object).toBe('chat.completion.chunk');
    const tokens = chunks.slice(1, -2);
    expect(tokens).toHaveLength(12);
    expect(tokens.map((c) => (c.choices[0] as unknown as Routed).routing.source)).toEqual(new Array(12).fill('llm'));
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: 12, routed_tokens: 12 });
    const whole = await client.chat.completions.create(params as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(whole.choices[0]!.message.content!);
  });
});

describe('slots, cancellation and refusals', () => {
  test('two running streams fill the slots (429 for a third); closing them gives the slots back', async () => {
    const long = {
      model: MODEL,
      messages: [{ role: 'user' as const, content: 'Go on.' }],
      max_tokens: 400,
      temperature: 0,
      routing_mode: 'llm_only',
      stream: true,
    };
    const streams = await Promise.all([0, 1].map(() => client.chat.completions.create(long as OpenAI.ChatCompletionCreateParamsStreaming)));
    const iterators = streams.map((s) => s[Symbol.asyncIterator]());
    for (const it of iterators) for (let i = 0; i < 3; i++) expect((await it.next()).done).toBe(false);
    expect(await activeGenerations()).toBe(2);

    const busy = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 2 }).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(OpenAI.RateLimitError);
    expect((busy as InstanceType<typeof OpenAI.APIError>).error).toEqual({
      message: 'too many generations at once (limit 2); try again shortly',
      type: 'rate_limit_error',
      param: null,
      code: 'rate_limit_exceeded',
    });

    // 400 tokens at ≥ 10 ms each would take 4 s; closed now, both end within a step or two.
    for (const s of streams) s.controller.abort();
    await waitForActive(0, 2_000, 'the closed streams to release their slots');
    const after = await client.completions.create({
      model: MODEL,
      prompt: 'x',
      max_tokens: 2,
      temperature: 0,
      routing_mode: 'small_only',
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(after.usage!.completion_tokens).toBe(2);
  });

  test('a non-streaming request whose client goes away stops its generation and frees its slot', async () => {
    const controller = new AbortController();
    const long = { model: MODEL, prompt: 'Once', max_tokens: 400, temperature: 0, routing_mode: 'llm_only' };
    const pending = client.completions.create(long as OpenAI.CompletionCreateParamsNonStreaming, { signal: controller.signal }).catch((e: unknown) => e);
    await waitForActive(1, 3_000, 'the generation to start');
    controller.abort();
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError);
    // 400 tokens at ≥ 10 ms each would hold the slot for 4 s.
    await waitForActive(0, 2_000, 'the abandoned generation to release its slot');
  });

  test('every error status in OpenAI shape: 401, 404 (model, path), 400 (unsupported, n, range), 413', async () => {
    const failure = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status, error: e.error }),
      );
    const wrongKey = new OpenAI({ apiKey: 'wrong', baseURL: `${base}/v1`, maxRetries: 0 });
    expect(await failure(wrongKey.models.list())).toEqual({
      status: 401,
      error: { message: expect.stringContaining('this edge requires an access token'), type: 'authentication_error', param: null, code: 'invalid_api_key' },
    });
    expect(await failure(client.completions.create({ model: 'gpt-4o', prompt: 'x' }))).toEqual({
      status: 404,
      error: {
        message: `the model "gpt-4o" does not exist on this edge; it serves ${MODEL}`,
        type: 'invalid_request_error',
        param: 'model',
        code: 'model_not_found',
      },
    });
    expect(await failure(client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], n: 2 }))).toEqual({
      status: 400,
      error: { message: 'n must be 1: this edge generates one choice per request, got 2', type: 'invalid_request_error', param: 'n', code: null },
    });
    expect(await failure(client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], logit_bias: { '5': 1 } }))).toEqual({
      status: 400,
      error: { message: 'unsupported parameter: logit_bias is not supported by this edge', type: 'invalid_request_error', param: 'logit_bias', code: null },
    });
    expect(await failure(client.completions.create({ model: MODEL, prompt: 'x', temperature: 3 }))).toEqual({
      status: 400,
      error: { message: 'temperature must be in [0, 2], got 3', type: 'invalid_request_error', param: 'temperature', code: null },
    });
    expect(await failure(client.completions.create({ model: MODEL, prompt: 'x'.repeat(300_000) }))).toEqual({
      status: 413,
      error: { message: 'request body is larger than 262144 bytes', type: 'invalid_request_error', param: null, code: 'request_too_large' },
    });
    const noPath = await fetch(`${base}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: '{}' });
    expect(noPath.status).toBe(404);
    expect(await noPath.json()).toEqual({
      error: { message: 'no such endpoint: POST /v1/embeddings', type: 'invalid_request_error', param: null, code: null },
    });
    expect(await activeGenerations()).toBe(0);
  });
});

describe('the end-of-turn token', () => {
  test("the tokenizer config's eos_token ends a chat reply: finish_reason stop, the token itself not in the text", async () => {
    const messages = [{ role: 'user' as const, content: 'A story about a dog.' }];
    const request = { model: MODEL, messages, max_tokens: 12, temperature: 0, routing_mode: 'small_only' };
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming))
      chunks.push(chunk);
    const tokens = chunks.filter((c) => c.choices[0]?.finish_reason === null && (c.choices[0] as unknown as Partial<Routed>).routing);
    const ids = tokens.map((c) => (c.choices[0] as unknown as Routed).routing.token_id);
    // A pack whose end-of-turn token (as <|im_end|> is Qwen's) is the reply's fourth token: the same reply stops before it.
    const eot = ids[3]!;
    const first = ids.indexOf(eot);
    const eotPack = await makeChatPack();
    const configPath = join(eotPack.dir, 'tokenizer_config.json');
    writeFileSync(configPath, JSON.stringify({ ...JSON.parse(readFileSync(configPath, 'utf8')), eos_token: tokenizer.idToToken(eot) }));
    const eotEdge = await startEdge({
      ...DEFAULT_EDGE_CONFIG,
      host: '127.0.0.1',
      port: 0,
      grpcPort: -1,
      edgeModel: eotPack.dir,
      router: undefined,
      cloud: undefined,
      logLevel: 'error',
    });
    try {
      const eotClient = new OpenAI({ apiKey: 'unused', baseURL: `${eotEdge.url}v1`, maxRetries: 0 });
      const reply = await eotClient.chat.completions.create(request as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const beforeEot = tokens
        .slice(0, first)
        .map((c) => c.choices[0]!.delta.content)
        .join('');
      expect(reply.choices[0]).toMatchObject({ message: { content: beforeEot }, finish_reason: 'stop' });
      expect(reply.usage!.completion_tokens).toBe(first);
    } finally {
      await eotEdge.stop();
      eotPack.remove();
    }
  });
});
