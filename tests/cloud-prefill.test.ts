/**
 * Prefill ahead (--cloud-prefill): a joint generation may open its cloud conversation with the prompt as soon
 * as it starts, so that the shim prefills while the edge does. Through a real shim over gRPC: the open goes
 * out before the first routed step, which then carries only the tokens decoded since and finds the prompt in
 * the cloud's cache; a generation that never routes closes its early session at the end; an early open the
 * shim refuses costs the generation nothing. On the demo pair (the shim's core in process): the tokens are
 * those of the lazy open in every mode, with and without speculation. And `auto`'s decision, input by input.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { interceptSteps, type CloudClient } from '../src/edge/cloud/cloud-client.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';
import { DEFAULT_EDGE_CONFIG, EDGE_USAGE, parseEdgeConfig } from '../src/edge/config.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { prefillsAhead, type PrefillInputs } from '../src/edge/loop/cloud-prefill.ts';
import { generate, type DoneEvent, type EdgeEngine, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import type { CloudPrefillMode } from '../src/edge/loop/edge-engine.ts';
import { parseGenerationRequest, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import { EdgeContext, greedyReference, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { FakeOpenAi } from './helpers/cloud-fake-openai.ts';
import { FakeSglang } from './helpers/cloud-fake-sglang.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';

const PROMPT = 'Once upon a time, there was a little dog';
const router = new TopProbabilityScorer();

let pair: DemoPairModels;
beforeAll(async () => {
  pair = await loadDemoPairModels({ record: false });
});
afterAll(() => pair.release());

function engineOn(cloud: CloudClient, mode: CloudPrefillMode): EdgeEngine {
  return { edgeModel: pair.edge, router, tokenizer: pair.tokenizer, cloud, cloudPrefill: { mode } };
}

async function run(engine: EdgeEngine, raw: RawGenerationRequest) {
  const tokens: TokenEvent[] = [];
  let done: DoneEvent | undefined;
  for await (const e of generate(engine, parseGenerationRequest({ prompt: PROMPT, temperature: 0, ...raw }))) {
    if (e.type === 'token') tokens.push(e);
    else done = e;
  }
  return { ids: tokens.map((t) => t.id), tokens, done: done! };
}

const promptLength = () => pair.tokenizer.encode(PROMPT, { addBos: true }).length;

describe('through a real shim', () => {
  test('eager: the prompt goes out before the first routed step, the decided tokens follow as extends, and the step finds them all cached', async () => {
    const lines: Record<string, unknown>[] = [];
    const shim = await startTestShim({}, { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) });
    const grpc = new GrpcCloudClient({ address: shim.address });
    // The first step waits until the shim has computed the extends before it: what an edge slower than its
    // cloud sees, made certain here (a step already waiting behind an extend computes it itself).
    const computed = (length: number) => lines.some((l) => l.msg === 'extend' && l.context === length);
    let first = true;
    const client = interceptSteps(grpc, async (request, next) => {
      for (let waited = 0; first && !computed(request.context.length) && waited < 5_000; waited += 5) await Bun.sleep(5);
      first = false;
      return next(request);
    });
    try {
      // τ where the first tokens stay on the edge and later ones route (the demo edge model's top-1 probability).
      const request = { mode: 'joint', threshold: 0.45, maxNewTokens: 24 } as const;
      const eager = await run(engineOn(client, 'eager'), request);
      const firstRouted = eager.tokens.findIndex((t) => t.source === 'llm');
      expect(firstRouted).toBeGreaterThan(0);
      const eagerLines = lines.splice(0);
      const lazy = await run(engineOn(grpc, 'lazy'), request);
      expect(eager.ids).toEqual(lazy.ids);
      expect(lazy.tokens.map((t) => t.source)).toEqual(eager.tokens.map((t) => t.source));

      const events = eagerLines.map((l) => l.msg).filter((m) => m === 'session opened' || m === 'prefill' || m === 'step');
      expect(events.slice(0, 3)).toEqual(['session opened', 'prefill', 'step']);
      const prefill = eagerLines.find((l) => l.msg === 'prefill')!;
      expect([prefill.context, prefill.cachedTokens, prefill.prefilledTokens]).toEqual([promptLength(), 0, promptLength()]);
      const [first] = eagerLines.filter((l) => l.msg === 'step');
      // No new token in the step: the ones decided before it went as extends, and are in the cloud's KV cache.
      expect([first!.tokenIndex, first!.delta, first!.cachedTokens]).toEqual([firstRouted, 0, promptLength() + firstRouted]);
      const [lazyFirst] = lines.filter((l) => l.msg === 'step');
      expect([lazyFirst!.delta, lazyFirst!.cachedTokens]).toEqual([0, 0]);
      // What left counts the open and the extends: the prompt once, then every token the edge decided before the
      // last (after it, the answer ended), on one stream.
      expect(eager.done.metrics.cloud.streams).toBe(1);
      const decided = eager.tokens.slice(0, -1).filter((t) => t.source !== 'llm').length;
      expect(eager.done.metrics.cloud.tokensSent).toBe(promptLength() + decided);
      expect(eager.done.cloudText).toBe(pair.tokenizer.decode([...pair.tokenizer.encode(PROMPT, { addBos: true }), ...eager.ids.slice(0, -1)]));
    } finally {
      await grpc.close();
      await shim.shutdown();
    }
  });

  test('a first step sent after the shim said `opened` and `prefilled` goes out on the stream opened ahead, whose cache holds the prompt', async () => {
    const lines: Record<string, unknown>[] = [];
    const shim = await startTestShim({}, { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) });
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const edge = new EdgeContext([1, 403, 261, 376]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'late-step' });
      conversation.prefill!(edge.step());
      // An edge model slower than the cloud's prefill: both of the shim's messages are in before the first step.
      while (!lines.some((l) => l.msg === 'prefill')) await Bun.sleep(5);
      await Bun.sleep(50);
      edge.push([263, 353], 'slm');
      const reply = await conversation.next(edge.step());
      await conversation.close();
      expect(reply.tokens).toEqual(await greedyReference(pair.cloudModel, edge.ids, 1));
      expect(lines.filter((l) => l.msg === 'session opened')).toHaveLength(1);
      const step = lines.find((l) => l.msg === 'step')!;
      expect([step.delta, step.cachedTokens]).toEqual([2, 4]);
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('extends: each computed when nothing waits behind it; several sent at once with the step right behind: the replies are the greedy reference whatever was computed ahead', async () => {
    const lines: Record<string, unknown>[] = [];
    const shim = await startTestShim({}, { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) });
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const edge = new EdgeContext([1, 403, 261, 376]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'extends' });
      conversation.prefill!(edge.step());
      for (const id of [263, 353]) {
        edge.push([id], 'slm');
        conversation.extend!(edge.step());
        await waitFor(() => lines.some((l) => l.msg === 'extend' && l.context === edge.ids.length), 5_000, 'the shim to compute the extend');
      }
      const reply = await conversation.next(edge.step());
      expect(reply.tokens).toEqual(await greedyReference(pair.cloudModel, edge.ids, 1));
      // Nothing new in the step, and nothing left for it to compute.
      const step = lines.find((l) => l.msg === 'step')!;
      expect([step.delta, step.cachedTokens]).toEqual([0, 6]);
      expect(lines.filter((l) => l.msg === 'extend').map((l) => [l.context, l.cachedTokens, l.prefilledTokens])).toEqual([
        [5, 4, 1],
        [6, 5, 1],
      ]);

      // Three extends and the step written back to back: whichever the shim computed, the step's reply is the same.
      edge.push(reply.tokens, 'llm');
      for (const id of [264, 278, 301]) {
        edge.push([id], 'slm');
        conversation.extend!(edge.step());
      }
      edge.push([290], 'slm');
      const after = await conversation.next(edge.step());
      expect(after.tokens).toEqual(await greedyReference(pair.cloudModel, edge.ids, 1));
      expect(lines.filter((l) => l.msg === 'session opened')).toHaveLength(1);
      await conversation.close();
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('a generation that never routes closes the session it opened ahead; what left says so', async () => {
    const lines: Record<string, unknown>[] = [];
    const shim = await startTestShim({}, { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) });
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const { tokens, done } = await run(engineOn(client, 'eager'), { mode: 'joint', threshold: 0, maxNewTokens: 8 });
      expect(tokens.every((t) => t.source === 'slm')).toBe(true);
      expect(done.metrics.cloud.streams).toBe(1);
      // The prompt, then every token the edge decided but the last, as extends: the cloud's cache kept up.
      const sent = promptLength() + tokens.length - 1;
      expect(done.metrics.cloud.tokensSent).toBe(sent);
      expect(done.cloudText).toBe(pair.tokenizer.decode([...pair.tokenizer.encode(PROMPT, { addBos: true }), ...tokens.slice(0, -1).map((t) => t.id)]));
      expect(shim.store.count).toBe(0);
      expect(lines.filter((l) => l.msg === 'session closed').map((l) => [l.steps, l.contextTokens])).toEqual([[0, sent]]);
      // The same generation opened lazily sends nothing.
      const lazy = await run(engineOn(client, 'lazy'), { mode: 'joint', threshold: 0, maxNewTokens: 8 });
      expect(lazy.done.metrics.cloud.streams).toBe(0);
      expect(lazy.ids).toEqual(tokens.map((t) => t.id));
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('an early open the shim refuses (its session cap) does not fail the generation: the first routed step opens its own', async () => {
    const lines: Record<string, unknown>[] = [];
    const shim = await startTestShim({ maxSessions: 1 }, { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) });
    const client = new GrpcCloudClient({ address: shim.address, healthProbe: false });
    const blockerClient = new GrpcCloudClient({ address: shim.address });
    try {
      const request = { mode: 'joint', threshold: 0.45, maxNewTokens: 24 } as const;
      const lazy = await run(engineOn(client, 'lazy'), request);
      // Another edge holds the shim's one session while this generation opens ahead.
      const blocker = blockerClient.openConversation({ gate: CloudGate.OPEN, requestId: 'blocker' });
      await blocker.next(new EdgeContext([1, 403]).step());
      lines.length = 0;
      const held = interceptSteps(client, async (step, next) => {
        // By the first routed step the shim has refused the open; the blocker then leaves.
        while (!lines.some((l) => l.msg === 'session failed' && l.code === 'RESOURCE_EXHAUSTED')) await Bun.sleep(5);
        await blocker.close();
        return next(step);
      });
      const eager = await run(engineOn(held, 'eager'), request);
      expect(eager.ids).toEqual(lazy.ids);
      expect(eager.done.metrics.fallback).toBe(0);
      expect(eager.done.metrics.routed).toBe(lazy.done.metrics.routed);
      expect(lazy.done.metrics.routed).toBeGreaterThan(0);
      expect(client.state()).not.toBe('circuit-open');
    } finally {
      await blockerClient.close();
      await client.close();
      await shim.shutdown();
    }
  });
});

describe('HTTP backends', () => {
  /** Opens ahead with `prompt`, then asks one routed step after two edge tokens; the step's reply and the server's requests. */
  async function aheadThenStep(backend: 'sglang' | 'openai', url: string) {
    const shim = await startTestShim({ backend, backendUrl: url, modelPack: pair.cloudModel.pack.dir });
    const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
    try {
      const edge = new EdgeContext([1, 403, 261]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'ahead', routingKey: 'chat-7' });
      conversation.prefill!(edge.step());
      edge.push([376, 263], 'slm');
      const reply = await conversation.next(edge.step());
      await conversation.close();
      expect(reply.tokens).toEqual(await greedyReference(pair.cloudModel, edge.ids, 1));
      return reply;
    } finally {
      await client.close();
      await shim.shutdown();
    }
  }

  test('SGLang: a /generate with no new tokens on the prompt, with the routing key; the step finds it in the radix cache', async () => {
    const fake = new FakeSglang(pair.cloudModel, pair.tokenizer);
    try {
      const reply = await aheadThenStep('sglang', fake.url);
      const [prefill, step] = fake.requests as { input_ids: number[]; sampling_params: { max_new_tokens: number }; routing_key?: string }[];
      expect([prefill!.input_ids, prefill!.sampling_params.max_new_tokens]).toEqual([[1, 403, 261], 0]);
      // The conversation's key (as the edge sends it, hashed) on both: the gateway keeps them on one worker.
      expect(prefill!.routing_key).toBeString();
      expect([step!.routing_key, ...fake.routingKeys]).toEqual([prefill!.routing_key, prefill!.routing_key, prefill!.routing_key]);
      expect(step!.input_ids).toEqual([1, 403, 261, 376, 263]);
      expect(reply.cachedTokens).toBe(3);
    } finally {
      await fake.stop();
    }
  });

  test('SGLang: an extend is a /generate with no new tokens on the longer context; one the backend fails leaves the stream up and the step computes it', async () => {
    const fake = new FakeSglang(pair.cloudModel, pair.tokenizer);
    const lines: Record<string, unknown>[] = [];
    const shim = await startTestShim(
      { backend: 'sglang', backendUrl: fake.url, modelPack: pair.cloudModel.pack.dir },
      { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) },
    );
    const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
    try {
      const edge = new EdgeContext([1, 403, 261]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'extend-sglang' });
      conversation.prefill!(edge.step());
      edge.push([376], 'slm');
      conversation.extend!(edge.step());
      await waitFor(() => lines.some((l) => l.msg === 'extend'), 5_000, 'the shim to compute the extend');
      // The backend fails the next extend's /generate: nothing is answered for it, and the stream goes on.
      fake.options.httpError = { status: 500, body: { error: { message: 'out of memory' } } };
      edge.push([263], 'slm');
      conversation.extend!(edge.step());
      await waitFor(() => lines.some((l) => l.msg === 'extend not computed'), 5_000, 'the failed extend to be logged');
      fake.options.httpError = undefined;
      const reply = await conversation.next(edge.step());
      await conversation.close();
      expect(reply.tokens).toEqual(await greedyReference(pair.cloudModel, edge.ids, 1));
      const requests = fake.requests as { input_ids: number[]; sampling_params: { max_new_tokens: number } }[];
      expect(requests.map((r) => [r.input_ids.length, r.sampling_params.max_new_tokens])).toEqual([
        [3, 0],
        [4, 0],
        [5, 0],
        [5, 1],
      ]);
      expect(lines.filter((l) => l.msg === 'session opened')).toHaveLength(1);
    } finally {
      await client.close();
      await shim.shutdown();
      await fake.stop();
    }
  });

  test('OpenAI-compatible: nothing to prefill, nothing sent ahead; the step is served as without', async () => {
    const fake = new FakeOpenAi(pair.cloudModel, pair.tokenizer);
    try {
      await aheadThenStep('openai', fake.url);
      expect(fake.requests).toHaveLength(1);
    } finally {
      await fake.stop();
    }
  });
});

describe('on the demo pair', () => {
  test('lazy, eager and auto give the same tokens in every mode, with and without speculation', async () => {
    for (const mode of ['joint', 'llm_only', 'small_only'] as const) {
      for (const speculate of [false, true]) {
        const request = { mode, threshold: 0.5, maxNewTokens: 24, speculate };
        const runs = [];
        for (const setting of ['lazy', 'eager', 'auto'] as const) runs.push(await run(engineOn(pair.cloud, setting), request));
        const [first, ...rest] = runs;
        for (const other of rest) {
          expect(`${mode} ${speculate} ${other.ids.join(',')}`).toBe(`${mode} ${speculate} ${first!.ids.join(',')}`);
          expect(other.tokens.map((t) => t.source)).toEqual(first!.tokens.map((t) => t.source));
        }
        if (mode === 'joint') expect(first!.done.metrics.routed).toBeGreaterThan(0);
      }
    }
  });
});

describe("auto's decision", () => {
  const base: PrefillInputs = {
    setting: 'auto',
    mode: 'joint',
    cloudState: 'ready',
    threshold: 0.5,
    maxNewTokens: 64,
    earlierTurnsRouted: undefined,
    lowScoreShare: undefined,
  };
  const cases: [string, Partial<PrefillInputs>, boolean][] = [
    ['nothing known (a fresh box): opens', {}, true],
    ['lazy never opens ahead', { setting: 'lazy', threshold: 1 }, false],
    ['eager opens whatever the signs', { setting: 'eager', threshold: 0, earlierTurnsRouted: false }, true],
    ['not joint: llm_only asks at once, small_only never', { mode: 'llm_only' }, false],
    ['small_only', { mode: 'small_only', setting: 'eager' }, false],
    ['a cloud the breaker holds off', { cloudState: 'circuit-open', setting: 'eager' }, false],
    ['an unavailable cloud (the breaker would make the open its probe)', { cloudState: 'unavailable' }, false],
    ['a mismatched tokenizer', { cloudState: 'mismatch' }, false],
    ['a cloud still connecting', { cloudState: 'connecting' }, true],
    ['a share budget will route', { routeShare: 0.1, earlierTurnsRouted: false }, true],
    ['a token rate will route', { routeTokensPerMinute: 60, lowScoreShare: 0 }, true],
    ['a share budget of 0 routes nothing', { routeShare: 0, earlierTurnsRouted: false }, false],
    ['τ = 1 routes every position', { threshold: 1, earlierTurnsRouted: false }, true],
    ['τ = 0 routes none', { threshold: 0 }, false],
    ["the conversation's earlier turns routed", { earlierTurnsRouted: true, lowScoreShare: 0 }, true],
    ["the conversation's earlier turns did not", { earlierTurnsRouted: false, lowScoreShare: 0.5 }, false],
    ['recent scores: one routed token expected over the answer', { lowScoreShare: 1 / 64 }, true],
    ['recent scores: less than one expected', { lowScoreShare: 1 / 65 }, false],
    ['recent scores: none below τ', { lowScoreShare: 0 }, false],
    ['a shorter answer needs a larger share', { lowScoreShare: 0.05, maxNewTokens: 16 }, false],
  ];
  for (const [name, inputs, expected] of cases) {
    test(name, () => expect(prefillsAhead({ ...base, ...inputs })).toBe(expected));
  }
});

describe('the setting', () => {
  test('--cloud-prefill eager|lazy|auto (EDGE_CLOUD_PREFILL): lazy by default, anything else refused', () => {
    expect(DEFAULT_EDGE_CONFIG.cloudPrefill).toBe('lazy');
    expect(parseEdgeConfig(['--cloud-prefill', 'eager'], {}).cloudPrefill).toBe('eager');
    expect(parseEdgeConfig([], { EDGE_CLOUD_PREFILL: 'auto' }).cloudPrefill).toBe('auto');
    expect(EDGE_USAGE).toContain('--cloud-prefill eager|lazy|auto');
    expect(() => parseEdgeConfig(['--cloud-prefill', 'soon'], {})).toThrow('--cloud-prefill');
  });
});
