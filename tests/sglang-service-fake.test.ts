/**
 * `bench fleet`'s SGLang service fake over real HTTP: the reply format the shim reads, cached tokens from
 * its prefix cache as a session's context grows, the service time, and clear 400s for bad requests.
 */
import { afterAll, expect, test } from 'bun:test';
import { SglangBackend } from '../src/cloud/backends/sglang-backend.ts';
import { nextFakeId, serveSglangFake } from '../src/tools/bench/sglang-service-fake.ts';
import { FifoSlots } from '../src/shared/process/fifo-slots.ts';

const fake = serveSglangFake({ vocabSize: 512, maxContext: 64, serviceMs: 5, prefillMsPerToken: 0, cacheTokens: 1_000 });
afterAll(() => fake.stop());

async function generate(body: Record<string, unknown>): Promise<{ status: number; json: any; text: string }> {
  const response = await fetch(`${fake.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, json: text.startsWith('{') ? JSON.parse(text) : undefined, text };
}

test('a session that resends its growing context finds all but its new tokens cached; the next id is the hash of the last three', async () => {
  const context = [1, 40, 41, 42, 43];
  const cached: number[] = [];
  for (let step = 0; step < 3; step++) {
    const started = performance.now();
    const { status, json } = await generate({
      input_ids: context,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      return_logprob: true,
      rid: `r${step}`,
      routing_key: 'gen-1',
      stream: false,
    });
    expect(status).toBe(200);
    // One decode step of 5 ms at least (the timer may fire late, never early).
    expect(performance.now() - started).toBeGreaterThanOrEqual(4.5);
    const id = nextFakeId(context, 512);
    expect(json.output_ids).toEqual([id]);
    expect(json.meta_info.output_token_logprobs).toEqual([[-0.25, id, null]]);
    expect(json.meta_info.finish_reason).toEqual({ type: 'length', length: 1 });
    expect(json.meta_info.prompt_tokens).toBe(context.length);
    expect(json.meta_info.completion_tokens).toBe(1);
    expect(json.meta_info.id).toBe(`r${step}`);
    cached.push(json.meta_info.cached_tokens);
    context.push(id, 100 + step, 200 + step);
  }
  // Step 0: nothing cached; then the last context and its output, not the two new edge tokens.
  expect(cached).toEqual([0, 6, 9]);
});

test('streaming: cumulative chunks, one per token, then [DONE]; a stop id ends the output', async () => {
  const input = [1, 7, 8];
  const first = nextFakeId(input, 512);
  const second = nextFakeId([...input, first], 512);
  const { status, text } = await generate({
    input_ids: input,
    sampling_params: { max_new_tokens: 3, stop_token_ids: [second] },
    return_logprob: true,
    top_logprobs_num: 2,
    stream: true,
  });
  expect(status).toBe(200);
  const events = text.trim().split('\n\n');
  expect(events.at(-1)).toBe('data: [DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
  expect(chunks.map((c) => c.output_ids)).toEqual([[first], [first, second]]);
  expect(chunks.map((c) => c.meta_info.finish_reason)).toEqual([null, { type: 'stop', matched: second }]);
  expect(chunks[1].meta_info.output_top_logprobs[1]).toEqual([
    [-0.25, second, null],
    [-1.25, (second + 1) % 512, null],
  ]);
});

test('bad requests get SGLang-style 400s with a message; the health and model-info endpoints answer', async () => {
  expect(await generate({ input_ids: [] })).toMatchObject({ status: 400, json: { error: { message: 'input_ids cannot be empty.' } } });
  expect(await generate({ input_ids: [1, 512] })).toMatchObject({ status: 400, json: { error: { message: 'Token ids must be in [0, 512).' } } });
  const long = await generate({ input_ids: Array.from({ length: 64 }, () => 3) });
  expect(long.json.error.message).toBe("The input (64 tokens) is longer than the model's context length (64 tokens).");
  expect(await generate({ input_ids: [1], session_params: {} })).toMatchObject({ status: 400, json: { message: 'unexpected field "session_params"' } });
  expect(await generate({ input_ids: [1], routing_key: 5 })).toMatchObject({ status: 400, json: { message: 'invalid value for routing_key: 5' } });
  const notJson = await fetch(`${fake.url}/generate`, { method: 'POST', body: '{' });
  expect(notJson.status).toBe(400);
  expect((await fetch(`${fake.url}/health`)).status).toBe(200);
  expect(await (await fetch(`${fake.url}/get_model_info`)).json()).toMatchObject({ is_generation: true });
  expect((await fetch(`${fake.url}/abort_request`, { method: 'POST', body: JSON.stringify({ rid: 'r1' }) })).status).toBe(200);
});

test("the shim's SGLang backend reads the fake's replies, streaming and not, alike", async () => {
  // A first token no other test of this file sends: nothing of it is cached before.
  const input = [30, 20, 21, 22];
  const expected = [nextFakeId(input, 512)];
  expected.push(nextFakeId([...input, expected[0]!], 512));
  for (const stream of [false, true]) {
    const backend = new SglangBackend({ baseUrl: fake.url, apiKey: undefined, retries: 0, stream, vocabSize: 512, maxContext: 64 });
    const sequence = backend.openSequence();
    const sampling = { temperature: 0, topP: 1, seed: undefined, stopTokenIds: [], topLogprobs: 1 };
    const result = await sequence.step({ context: input, maxTokens: 2, sampling, requestId: `s-${stream}`, signal: new AbortController().signal });
    expect(result.ids).toEqual(expected);
    expect(result.logprobs).toEqual([-0.25, -0.25]);
    expect(result.top).toEqual(expected.map((id) => [{ id, logprob: -0.25 }]));
    expect(result.finish).toBe('length');
    // Asked twice: the second time all but the last input token is cached.
    expect(result.cachedTokens).toBe(stream ? 3 : 0);
    sequence.dispose();
    await backend.close();
  }
});

test('FifoSlots: at most N at once, the rest granted in arrival order as slots free up', async () => {
  const slots = new FifoSlots(2);
  const granted: string[] = [];
  const take = (name: string) => slots.acquire().then((release) => (granted.push(name), release));
  const [a, b] = await Promise.all([take('a'), take('b')]);
  const c = take('c');
  const d = take('d');
  await Bun.sleep(0);
  expect(granted).toEqual(['a', 'b']);
  expect(slots.load).toEqual({ serving: 2, waiting: 2 });
  b();
  b();
  await c;
  expect(granted).toEqual(['a', 'b', 'c']);
  expect(slots.load).toEqual({ serving: 2, waiting: 1 });
  a();
  (await d)();
  (await c)();
  expect(granted).toEqual(['a', 'b', 'c', 'd']);
  expect(slots.load).toEqual({ serving: 0, waiting: 0 });
  expect(() => new FifoSlots(0)).toThrow('slots must be an integer ≥ 1, got 0');
});

test('FifoSlots: a waiter whose signal aborts leaves the queue with its reason; the next in line gets the slot', async () => {
  const slots = new FifoSlots(1);
  const held = await slots.acquire();
  const controller = new AbortController();
  const leaving = slots.acquire(controller.signal);
  const staying = slots.acquire();
  expect(slots.load).toEqual({ serving: 1, waiting: 2 });
  controller.abort(new Error('gone'));
  await expect(leaving).rejects.toThrow();
  expect(slots.load).toEqual({ serving: 1, waiting: 1 });
  held();
  (await staying)();
  expect(slots.load).toEqual({ serving: 0, waiting: 0 });
});

test('with slots 1, concurrent requests are served one after another, each waiting for those before it', async () => {
  const limited = serveSglangFake({ vocabSize: 512, maxContext: 64, serviceMs: 40, prefillMsPerToken: 0, cacheTokens: 1_000, slots: 1 });
  try {
    const sent = performance.now();
    const requests = [0, 1, 2].map(async (i) => {
      const response = await fetch(`${limited.url}/generate`, {
        method: 'POST',
        body: JSON.stringify({ input_ids: [1, 60 + i], sampling_params: { max_new_tokens: 1 }, stream: i === 1 }),
      });
      expect(response.status).toBe(200);
      await response.text();
      return performance.now() - sent;
    });
    const finished = (await Promise.all(requests)).sort((x, y) => x - y);
    // One decode step of 40 ms each, one at a time: the k-th to finish does so after k + 1 steps (timers never fire early).
    finished.forEach((ms, k) => expect(ms).toBeGreaterThanOrEqual(40 * (k + 1) - 1));
  } finally {
    await limited.stop();
  }
});
