/**
 * The shim's load and its overloaded refusals over real gRPC on loopback: an SGLang service fake with one
 * slot and a long service time behind a shim that lets one step reach it at a time. Every step result
 * carries the load (skipped ones too); a second session's step that could not finish within its
 * conversation's deadline comes back `overloaded` at once, the stream goes on, the next step at the same
 * offset (carrying the edge's token) is served, and the edge's breaker does not count the refusal.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { nextFakeId, serveSglangFake, type SglangFake } from '../src/tools/bench/sglang-service-fake.ts';
import { EdgeContext, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { rawRouteStream } from './helpers/raw-route-stream.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

/** The fake's time for one token: long enough that a step is surely still running while another arrives. */
const SERVICE_MS = 400;
const VOCAB = 512;

let fake: SglangFake;
let shim: ShimServer;

beforeAll(async () => {
  fake = serveSglangFake({ vocabSize: VOCAB, maxContext: 512, serviceMs: SERVICE_MS, prefillMsPerToken: 0, cacheTokens: 10_000, slots: 1 });
  shim = await startTestShim({ backend: 'sglang', backendUrl: fake.url, maxInflightSteps: 1, backendRetries: 0 });
});

afterAll(async () => {
  await shim?.shutdown();
  await fake?.stop();
});

test('every step result carries the load: in flight, queued, the recent backend time, the limit (a skipped step too)', async () => {
  const served = nextFakeId([1, 403], VOCAB);
  const { responses, status } = await rawRouteStream(shim.address, [
    { open: { requestId: 'load-1', contextIds: [1, 403], sampling: { temperature: 0, topP: 1 } } },
    { step: { offset: 2, maxTokens: 1, threshold: 0.5 } },
    // Assumes the step before returned another token: skipped.
    { step: { offset: 2, ids: [(served + 1) % VOCAB, 7], sources: ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_SLM'], maxTokens: 1, threshold: 0.5, conditional: true } },
  ]);
  expect(status.code).toBe(0);
  const steps = responses.flatMap((r) => (r.step ? [r.step] : []));
  expect(steps.map((s) => [s.ids, s.skipped, s.overloaded])).toEqual([
    [[served], false, false],
    [[], true, false],
  ]);
  const [first, skipped] = steps.map((s) => s.load!);
  // The first step ran alone; its time (at least one service time) is the whole average so far.
  expect(first).toMatchObject({ stepsInFlight: 1, stepsQueued: 0, maxInFlight: 1 });
  expect(first!.backendMs).toBeGreaterThanOrEqual(SERVICE_MS - 1);
  expect(skipped).toEqual({ stepsInFlight: 0, stepsQueued: 0, backendMs: first!.backendMs, maxInFlight: 1 });
});

test('a step that could not finish within its deadline is refused at once as overloaded; the stream goes on and the breaker stays closed', async () => {
  const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 10_000, healthProbe: false });
  try {
    const busy = new EdgeContext([1, 300]);
    const holder = client.openConversation({ gate: CloudGate.OPEN, requestId: 'holder' });
    const warm = await holder.next(busy.step());
    expect(warm.load).toMatchObject({ stepsInFlight: 1, stepsQueued: 0 });
    busy.push(warm.tokens, 'llm');
    busy.push([9], 'slm');
    // Holds the only backend slot for one service time.
    const holding = holder.next(busy.step());
    await waitFor(() => shim.admission.load().stepsInFlight === 1, 5_000, 'the holder step to reach the backend');

    // Deadline 700 ms, recent backend time ≥ 400 ms: it would have to start by 300 ms, and waits ~400 ms.
    const deadlineMs = 700;
    const edge = new EdgeContext([1, 301]);
    const waiter = client.openConversation({ gate: CloudGate.OPEN, requestId: 'waiter', stepTimeoutMs: deadlineMs });
    const sent = performance.now();
    const refused = await waiter.next(edge.step());
    const elapsedMs = performance.now() - sent;
    expect(refused).toMatchObject({ tokens: [], overloaded: true, load: { stepsInFlight: 1, stepsQueued: 0 } });
    expect(refused.load!.backendMs).toBeGreaterThanOrEqual(SERVICE_MS - 1);
    expect(elapsedMs).toBeLessThan(deadlineMs / 4);
    expect(shim.admission.overloaded).toBe(1);
    // Not a cloud failure: the breaker holds nothing.
    expect(client.backoff.consecutiveFailures).toBe(0);
    expect(['ready', 'idle', 'connecting']).toContain(client.state());
    const session = (waiter as unknown as { sessionId: string }).sessionId;

    busy.push((await holding).tokens, 'llm');
    // The edge decided the position itself; its token goes in the next step's delta, on the same stream.
    edge.push([77], 'fallback');
    const served = await waiter.next(edge.step());
    expect(served.overloaded).toBeUndefined();
    expect(served.tokens).toEqual([nextFakeId(edge.ids, VOCAB)]);
    expect(served.load).toMatchObject({ stepsInFlight: 1, stepsQueued: 0, backendMs: expect.any(Number) });
    expect((waiter as unknown as { sessionId: string }).sessionId).toBe(session);
    expect(client.state()).toBe('ready');
    await Promise.all([holder.close(), waiter.close()]);
  } finally {
    await client.close();
  }
});

test('a conditional step sent behind an overloaded one assumed its token: it is skipped, and the stream goes on', async () => {
  const holding = rawRouteStream(shim.address, [
    { open: { requestId: 'holder-raw', contextIds: [1, 303], sampling: { temperature: 0, topP: 1 } } },
    { step: { offset: 2, maxTokens: 1, threshold: 0.5 } },
  ]);
  await waitFor(() => shim.admission.load().stepsInFlight === 1, 5_000, 'the holder step to reach the backend');
  const guess = 44;
  const { responses, status } = await rawRouteStream(shim.address, [
    { open: { requestId: 'refused-raw', contextIds: [1, 304], sampling: { temperature: 0, topP: 1 }, stepTimeoutMs: 700 } },
    { step: { offset: 2, maxTokens: 1, threshold: 0.5 } },
    { step: { offset: 2, ids: [guess, 45], sources: ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_SLM'], maxTokens: 1, threshold: 0.5, conditional: true } },
  ]);
  expect(status.code).toBe(0);
  const steps = responses.flatMap((r) => (r.step ? [r.step] : []));
  expect(steps.map((s) => [s.ids, s.overloaded, s.skipped, s.contextLength, s.load?.maxInFlight])).toEqual([
    [[], true, false, 2, 1],
    [[], false, true, 2, 1],
  ]);
  expect(responses.at(-1)?.end).toMatchObject({ code: 0, steps: 2, generatedTokens: 0, contextTokens: 2 });
  expect((await holding).status.code).toBe(0);
});

test("a conversation's own step deadline bounds its step on the edge, far below the client's", async () => {
  const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 10_000, healthProbe: false });
  try {
    const edge = new EdgeContext([1, 302]);
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'short', stepTimeoutMs: 150 });
    const sent = performance.now();
    // The backend is free, but one token takes 400 ms: the step misses its 150 ms deadline.
    expect(await rejectionCode(conversation.next(edge.step()))).toBe('DEADLINE_EXCEEDED');
    expect(performance.now() - sent).toBeLessThan(SERVICE_MS * 2);
    await conversation.close();
  } finally {
    await client.close();
  }
});
