/**
 * The cloud shim with its default (embedded) backend, through the edge's real gRPC client on loopback,
 * against the real stories260K cloud pack.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import type { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { logSoftmax, topK } from '../src/shared/model/logits.ts';
import { CloudRouterClient, HealthClient, type RouteResponse__Output } from '../src/shared/grpc/proto.ts';
import { bearer } from '../src/shared/grpc/auth.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { EdgeContext, greedyReference, loadCloudModel, referenceLogits, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { rawRouteStream } from './helpers/raw-route-stream.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

let model: DecoderModel;
let tokenizer: TextTokenizer;
let shim: ShimServer;

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
  shim = await startTestShim();
}, 30_000);

afterAll(async () => {
  await shim.shutdown();
  await model.release();
});

/** One client per test, always closed. */
async function withClient<T>(
  fn: (client: GrpcCloudClient) => Promise<T>,
  options: Partial<ConstructorParameters<typeof GrpcCloudClient>[0]> = {},
  target = shim,
): Promise<T> {
  const client = new GrpcCloudClient({ address: target.address, stepTimeoutMs: 5_000, ...options });
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/** A raw Route stream, for what the edge client never sends (gaps, bad ids). */
const rawStream = (messages: object[], target = shim, metadata?: grpc.Metadata) => rawRouteStream(target.address, messages, metadata);

const open = (contextIds: number[]) => ({ open: { requestId: 'raw', sampling: { temperature: 0 }, contextIds } });

describe('routed steps (embedded backend)', () => {
  test('greedy from BOS gives the cloud model’s own continuation, "Once upon a time"', async () => {
    await withClient(async (client) => {
      const edge = new EdgeContext([1]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'once' });
      const reply = await conversation.next(edge.step({ maxTokens: 5 }));
      expect(reply.tokens).toEqual([403, 407, 261, 378, 432]);
      expect(reply.tokens).toEqual(await greedyReference(model, [1], 5));
      expect(reply.text).toBe('Once upon a time,');
      expect(reply.cachedTokens).toBe(0);
      expect(reply.backendMs).toBeGreaterThan(0);
      await conversation.close();
    });
  });

  test('each step returns exactly the greedy token for the context, with edge tokens and spans mixed in', async () => {
    await withClient(async (client) => {
      const edge = new EdgeContext([1, 403, 407]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'mixed' });
      // The edge's own tokens between routed steps, as a decoding loop with a router would append them.
      const edgeTokens = [[261], [], [376, 298], [267], [], [338, 401, 396]];
      const spans = [1, 3, 1, 2, 4, 1];
      for (let i = 0; i < spans.length; i++) {
        edge.push(edgeTokens[i]!, 'slm');
        const expected = await greedyReference(model, edge.ids, spans[i]!);
        const cachedBefore = edge.ids.length;
        const reply = await conversation.next(edge.step({ maxTokens: spans[i]! }));
        expect(reply.tokens).toEqual(expected);
        expect(reply.logprobs).toHaveLength(expected.length);
        // Everything except the edge's delta (and the shim's own last token) was already in the KV cache.
        if (i > 0) expect(reply.cachedTokens).toBe(cachedBefore - edgeTokens[i]!.length - 1);
        edge.push(reply.tokens, 'llm');
      }
      await conversation.close();
    });
  });

  test('log-probabilities and top alternatives are the log-softmax of the model’s logits', async () => {
    await withClient(async (client) => {
      const edge = new EdgeContext([1, 403, 407, 261]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'logprobs' });
      const reply = await conversation.next(edge.step({ topLogprobs: 3 }));
      const expected = logSoftmax(await referenceLogits(model, edge.ids));
      const top = topK(expected, 3);
      expect(reply.topAlternatives[0]!.map((a) => a.id)).toEqual(top.map((t) => t.id));
      for (const [i, alt] of reply.topAlternatives[0]!.entries()) expect(alt.logprob).toBeCloseTo(top[i]!.value, 4);
      expect(reply.logprobs[0]).toBeCloseTo(expected[reply.tokens[0]!]!, 4);
      await conversation.close();
    });
  });

  test('a span stops at a stop token', async () => {
    await withClient(async (client) => {
      const edge = new EdgeContext([1, 403, 407]);
      const greedy = await greedyReference(model, edge.ids, 4);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'stop' });
      const reply = await conversation.next(edge.step({ maxTokens: 4, stopTokenIds: [greedy[1]!] }));
      expect(reply.tokens).toEqual(greedy.slice(0, 2));
      await conversation.close();
    });
  });

  test('sampling with a seed is reproducible and differs from greedy', async () => {
    const run = () =>
      withClient(async (client) => {
        const edge = new EdgeContext([1]);
        const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'sample' });
        const reply = await conversation.next(edge.step({ maxTokens: 12, temperature: 1, topP: 0.95, seed: 7 }));
        await conversation.close();
        return reply.tokens;
      });
    const [a, b] = [await run(), await run()];
    expect(a).toEqual(b);
    expect(a).not.toEqual(await greedyReference(model, [1], 12));
  });

  test('an evicted KV cache is rebuilt from the stored context transparently', async () => {
    const small = await startTestShim({ maxLiveSequences: 1 });
    try {
      await withClient(
        async (client) => {
          const a = new EdgeContext([1, 403]);
          const b = new EdgeContext([1, 403, 407, 261, 378]);
          const sa = client.openConversation({ gate: CloudGate.OPEN, requestId: 'a' });
          const sb = client.openConversation({ gate: CloudGate.OPEN, requestId: 'b' });
          for (let i = 0; i < 3; i++) {
            for (const [edge, conversation] of [
              [a, sa],
              [b, sb],
            ] as const) {
              const expected = await greedyReference(model, edge.ids, 2);
              const reply = await conversation.next(edge.step({ maxTokens: 2 }));
              expect(reply.tokens).toEqual(expected);
              edge.push(reply.tokens, 'llm');
            }
          }
          const stats = (small.backend as EmbeddedBackend).stats;
          expect(stats.evictions).toBeGreaterThanOrEqual(4);
          expect(stats.rebuilds).toBeGreaterThanOrEqual(4);
          await Promise.all([sa.close(), sb.close()]);
        },
        {},
        small,
      );
    } finally {
      await small.shutdown();
    }
  });

  test('the stream ends with an explicit final message and the session is freed', async () => {
    const { responses, status } = await rawStream([open([1]), { step: { offset: 1, ids: [], sources: [], maxTokens: 2 } }]);
    expect(status.code).toBe(grpc.status.OK);
    expect(responses.map((r) => r.message)).toEqual(['opened', 'step', 'end']);
    expect(responses[2]!.end).toMatchObject({ code: 0, steps: 1, generatedTokens: 2, contextTokens: 3 });
    await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
  });

  test('text is decoded as a continuation of the context', async () => {
    await withClient(async (client) => {
      const edge = new EdgeContext([1, 403, 407]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'text' });
      const reply = await conversation.next(edge.step({ maxTokens: 3 }));
      expect(reply.text).toBe(tokenizer.decode([...edge.ids, ...reply.tokens]).slice(tokenizer.decode(edge.ids).length));
      expect(reply.text.startsWith(' ')).toBe(true);
      await conversation.close();
    });
  });
});

describe('errors', () => {
  test('a gap in the appended ids is FAILED_PRECONDITION', async () => {
    const { responses, status } = await rawStream([
      open([1, 403]),
      { step: { offset: 2, ids: [407], sources: ['TOKEN_SOURCE_SLM'] } },
      { step: { offset: 6, ids: [261], sources: ['TOKEN_SOURCE_SLM'] } },
    ]);
    expect(status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(status.details).toContain('gap');
    expect(responses.at(-1)!.end).toMatchObject({ code: grpc.status.FAILED_PRECONDITION, steps: 1 });
  });

  test("a step never generates past the model's window: the last position is served, the one after is OUT_OF_RANGE", async () => {
    const window = model.pack.maxPositions;
    const prompt = (length: number) => [1, ...new Array<number>(length - 1).fill(403)];
    // Opened with max − 2 tokens, a one-token step brings it to max − 1: one token at the window's last position.
    const last = await rawStream([
      open(prompt(window - 2)),
      { step: { offset: window - 2, ids: [407], sources: ['TOKEN_SOURCE_SLM'], maxTokens: 5 } },
      { step: { offset: window, ids: [], sources: [] } },
    ]);
    expect(last.responses.map((r) => r.message)).toEqual(['opened', 'step', 'end']);
    expect(last.responses[1]!.step).toMatchObject({ contextLength: window, finishReason: 'FINISH_REASON_CONTEXT' });
    expect(last.responses[1]!.step!.ids).toHaveLength(1);
    expect(last.status.code).toBe(grpc.status.OUT_OF_RANGE);
    expect(last.status.details).toBe(`context of ${window} tokens fills the model's window of ${window}: no position is left to generate`);
    // Opened with max − 1 tokens, a one-token step fills the window: refused before the backend, nothing generated.
    const full = await rawStream([open(prompt(window - 1)), { step: { offset: window - 1, ids: [407], sources: ['TOKEN_SOURCE_SLM'] } }]);
    expect(full.responses.map((r) => r.message)).toEqual(['opened', 'end']);
    expect(full.responses[1]!.end).toMatchObject({ code: grpc.status.OUT_OF_RANGE, generatedTokens: 0 });
    expect(full.status.details).toBe(`context of ${window} tokens fills the model's window of ${window}: no position is left to generate`);
    await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
  });

  test('an overlap is FAILED_PRECONDITION too', async () => {
    const { status } = await rawStream([open([1, 403]), { step: { offset: 1, ids: [403], sources: ['TOKEN_SOURCE_SLM'] } }]);
    expect(status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(status.details).toContain('overlap');
  });

  test('token ids outside the vocabulary are INVALID_ARGUMENT (through the edge client)', async () => {
    await withClient(async (client) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'vocab' });
      const edge = new EdgeContext([1, 403, 9999]);
      const error = await conversation.next(edge.step()).catch((e) => e);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain('9999');
      await conversation.close();
    });
    await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
  });

  test('a step before open, and sources that do not match the ids, are rejected', async () => {
    expect((await rawStream([{ step: { offset: 0, ids: [1], sources: ['TOKEN_SOURCE_SLM'] } }])).status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect((await rawStream([open([1]), { step: { offset: 1, ids: [403], sources: [] } }])).status.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  test('an oversized message is RESOURCE_EXHAUSTED (grpc’s own limit) and frees the session', async () => {
    const small = await startTestShim({ maxMessageBytes: 16 * 1024 });
    try {
      await withClient(
        async (client) => {
          const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'big' });
          const edge = new EdgeContext([1]);
          expect((await conversation.next(edge.step())).tokens).toEqual([403]);
          edge.push([403], 'llm');
          const code = await rejectionCode(conversation.next(edge.step({ hiddenState: new Float32Array(8_192) })));
          expect(code).toBe('RESOURCE_EXHAUSTED');
          await conversation.close();
        },
        {},
        small,
      );
      await waitFor(() => small.store.count === 0, 2_000, 'sessions freed');
    } finally {
      await small.shutdown();
    }
  });

  test("the edge model's hidden state (slm_hidden_state) is accepted when it fits", async () => {
    await withClient(async (client) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'hidden' });
      const edge = new EdgeContext([1]);
      const reply = await conversation.next(edge.step({ hiddenState: new Float32Array(64).fill(0.5) }));
      expect(reply.tokens).toEqual([403]);
      await conversation.close();
    });
  });
});

describe('conditional steps (pipelined)', () => {
  const edgeSources = (n: number) => Array.from({ length: n }, () => 'TOKEN_SOURCE_SLM');

  test('a step sent before the previous result is served when its guess is the returned token, and skipped otherwise', async () => {
    // From BOS the cloud model continues 403 407 261 378 432 (see above).
    const { responses, status } = await rawStream([
      open([1]),
      { step: { offset: 1, ids: [], sources: [] } },
      // Assumes 403 at 1 (right): 403 is already there, 407 is appended, and the step is served.
      { step: { offset: 1, ids: [403, 407], sources: edgeSources(2), conditional: true } },
      // Assumes 299 at 3 (the cloud returns 261): skipped.
      { step: { offset: 3, ids: [299], sources: edgeSources(1), conditional: true } },
      // Assumes the skipped step's token at 4: skipped too, although 4 is the context's end.
      { step: { offset: 4, ids: [300], sources: edgeSources(1), conditional: true } },
      // Past the end of the context: skipped.
      { step: { offset: 5, ids: [], sources: [], conditional: true } },
      // A plain step continues from the context the shim really holds.
      { step: { offset: 4, ids: [], sources: [] } },
    ]);
    expect(status.code).toBe(grpc.status.OK);
    const steps = responses.filter((r) => r.step).map((r) => r.step!);
    expect(steps.map((s) => [s.ids, s.skipped, s.contextLength])).toEqual([
      [[403], false, 2],
      [[261], false, 4],
      [[], true, 4],
      [[], true, 4],
      [[], true, 4],
      [[378], false, 5],
    ]);
    expect(responses.at(-1)!.end).toMatchObject({ code: 0, steps: 6, generatedTokens: 3, contextTokens: 5 });
  });

  test('consecutive routed positions: the conditional step carries only the guess', async () => {
    const { responses } = await rawStream([
      open([1, 403]),
      { step: { offset: 2, ids: [], sources: [] } },
      { step: { offset: 2, ids: [407], sources: edgeSources(1), conditional: true } },
    ]);
    expect(responses.filter((r) => r.step).map((r) => [r.step!.ids, r.step!.skipped])).toEqual([
      [[407], false],
      [[261], false],
    ]);
  });

  /** A step request for `ids` (sources: the prompt [1], then `llm` for the first generated id and `slm` after). */
  const request = (ids: number[], conditional = false) => {
    const edge = new EdgeContext([1]);
    ids.slice(1).forEach((id, i) => edge.push([id], i === 0 ? 'llm' : 'slm'));
    return { ...edge.step(), context: [...edge.ids], sources: [...edge.sources], conditional };
  };

  test('the edge client sends a conditional step behind one in flight and keeps its copy of the context right', async () => {
    await withClient(async (client) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'pipelined' });
      // Both on the stream at once: the second assumes 403, which the first returns.
      const [a, b] = await Promise.all([conversation.next(request([1])), conversation.next(request([1, 403], true))]);
      expect(a.tokens).toEqual([403]);
      expect(b).toMatchObject({ tokens: [407] });
      expect(b.skipped).toBeFalsy();
      // A wrong assumption: skipped, and the next step's delta is computed from what the shim really holds.
      const [c, d] = await Promise.all([conversation.next(request([1, 403, 407])), conversation.next(request([1, 403, 407, 5, 6], true))]);
      expect(c.tokens).toEqual([261]);
      expect(d).toMatchObject({ tokens: [], skipped: true });
      expect((await conversation.next(request([1, 403, 407, 261]))).tokens).toEqual([378]);
      // One conditional step at most, and a plain step never, beside a step in flight.
      const e = conversation.next(request([1, 403, 407, 261, 378]));
      const f = conversation.next(request([1, 403, 407, 261, 378, 432], true));
      expect(await rejectionCode(conversation.next(request([1, 403, 407, 261, 378, 432, 5], true)))).toBe('FAILED_PRECONDITION');
      expect(await rejectionCode(conversation.next(request([1, 403, 407, 261, 378, 432])))).toBe('FAILED_PRECONDITION');
      expect((await e).tokens).toEqual([432]);
      expect((await f).skipped).toBeFalsy();
      // Sent after the step it assumes was answered, a conditional step whose guess was wrong is skipped at once.
      const after = request([1, 403, 407, 261, 378, 432, 1, 2], true);
      expect(await conversation.next(after)).toMatchObject({ tokens: [], skipped: true });
      await conversation.close();
    });
    await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
  });

  test('a stream that fails with a conditional step on it fails both; the next step reopens with the whole context', async () => {
    await withClient(async (client) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'pipelined-failure' });
      expect((await conversation.next(request([1]))).tokens).toEqual([403]);
      // An id outside the vocabulary fails the stream at the first step; the one behind it is not sent again.
      const [a, b] = await Promise.allSettled([conversation.next(request([1, 403, 9999])), conversation.next(request([1, 403, 9999, 5], true))]);
      expect(a.status === 'rejected' && a.reason.code).toBe('INVALID_ARGUMENT');
      expect(b.status === 'rejected' && b.reason.code).toBe('UNAVAILABLE');
      expect(b.status === 'rejected' && b.reason.message).toContain('pipelined steps are not sent again');
      expect((await conversation.next(request([1, 403, 407]))).tokens).toEqual([261]);
      await conversation.close();
    });
  });

  test('a plain step must still start at the context end', async () => {
    const { status } = await rawStream([
      open([1, 403]),
      { step: { offset: 2, ids: [], sources: [] } },
      { step: { offset: 2, ids: [407], sources: edgeSources(1) } },
    ]);
    expect(status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(status.details).toContain('overlap');
  });
});

describe('authentication', () => {
  let secured: ShimServer;
  beforeAll(async () => {
    secured = await startTestShim({ authToken: 's3cret-token' });
  }, 30_000);
  afterAll(() => secured.shutdown());

  test('a missing or wrong bearer token is UNAUTHENTICATED; the right one works', async () => {
    const step = (authToken?: string) =>
      withClient(
        async (client) => {
          const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'auth' });
          try {
            return (await conversation.next(new EdgeContext([1]).step())).tokens;
          } finally {
            await conversation.close();
          }
        },
        authToken ? { authToken } : {},
        secured,
      );
    expect(await rejectionCode(step())).toBe('UNAUTHENTICATED');
    expect(await rejectionCode(step('wrong'))).toBe('UNAUTHENTICATED');
    expect(await step('s3cret-token')).toEqual([403]);
  });

  test('the refusal is a final message plus the status', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', bearer('nope'));
    const { responses, status } = await rawStream([open([1])], secured, metadata);
    expect(status.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(responses.map((r) => r.message)).toEqual(['end']);
  });

  test('health checks need no token', async () => {
    const health = new HealthClient(secured.address, grpc.credentials.createInsecure());
    try {
      const reply = await new Promise<{ status: string }>((resolve, reject) =>
        health.Check({ service: '' }, { deadline: Date.now() + 2_000 }, (e, r) => (e ? reject(e) : resolve(r as { status: string }))),
      );
      expect(reply.status).toBe('SERVING');
    } finally {
      health.close();
    }
  });
});

describe('session lifecycle', () => {
  test('a cancelled stream frees its session', async () => {
    await withClient(async (client) => {
      const controller = new AbortController();
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'cancel', signal: controller.signal });
      const edge = new EdgeContext([1]);
      await conversation.next(edge.step());
      expect(shim.store.count).toBe(1);
      controller.abort();
      await waitFor(() => shim.store.count === 0, 2_000, 'session freed after cancel');
      expect(shim.store.totalTokens).toBe(0);
      expect(await rejectionCode(conversation.next(edge.step()))).toBe('CANCELLED');
      await conversation.close();
    });
  });

  test('the session cap answers RESOURCE_EXHAUSTED and the shim keeps serving', async () => {
    const capped = await startTestShim({ maxSessions: 2 });
    try {
      const clients = [0, 1, 2].map(() => new GrpcCloudClient({ address: capped.address }));
      try {
        const conversations = clients.map((c, i) => c.openConversation({ gate: CloudGate.OPEN, requestId: `cap-${i}` }));
        const edge = () => new EdgeContext([1]);
        expect((await conversations[0]!.next(edge().step())).tokens).toEqual([403]);
        expect((await conversations[1]!.next(edge().step())).tokens).toEqual([403]);
        const error = await conversations[2]!.next(edge().step()).catch((e) => e);
        expect(error.code).toBe('RESOURCE_EXHAUSTED');
        expect(error.message).toContain('at most 2');
        await conversations[0]!.close();
        await waitFor(() => capped.store.count === 1, 2_000, 'one session freed');
        const again = clients[0]!.openConversation({ gate: CloudGate.OPEN, requestId: 'cap-again' });
        expect((await again.next(edge().step({ maxTokens: 3 }))).tokens).toEqual([403, 407, 261]);
        await again.close();
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    } finally {
      await capped.shutdown();
    }
  });

  test('the total context budget answers RESOURCE_EXHAUSTED', async () => {
    const capped = await startTestShim({ maxContextTokens: 8 });
    try {
      await withClient(
        async (client) => {
          const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'budget' });
          const edge = new EdgeContext([1, 403, 407, 261, 378, 432]);
          expect((await conversation.next(edge.step())).tokens).toHaveLength(1);
          edge.push([383, 286, 261], 'slm');
          expect(await rejectionCode(conversation.next(edge.step()))).toBe('RESOURCE_EXHAUSTED');
          await conversation.close();
        },
        {},
        capped,
      );
      expect(capped.store.totalTokens).toBe(0);
    } finally {
      await capped.shutdown();
    }
  });

  test('an idle session expires; the edge client reopens it with the whole context', async () => {
    const idle = await startTestShim({ sessionIdleMs: 60 });
    try {
      await withClient(
        async (client) => {
          const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'idle' });
          const edge = new EdgeContext([1]);
          const first = await conversation.next(edge.step());
          edge.push(first.tokens, 'llm');
          await waitFor(() => idle.store.count === 0, 2_000, 'idle expiry');
          const second = await conversation.next(edge.step({ maxTokens: 2 }));
          expect(second.tokens).toEqual(await greedyReference(model, edge.ids, 2));
          expect(second.cachedTokens).toBe(0); // a new session: the context came whole
          await conversation.close();
        },
        {},
        idle,
      );
    } finally {
      await idle.shutdown();
    }
  });

  test('shutdown ends open streams with a final UNAVAILABLE message; health watchers see NOT_SERVING', async () => {
    const doomed = await startTestShim();
    const client = new CloudRouterClient(doomed.address, grpc.credentials.createInsecure());
    const health = new HealthClient(doomed.address, grpc.credentials.createInsecure());
    try {
      const call = client.Route({ deadline: Date.now() + 5_000 });
      const responses: RouteResponse__Output[] = [];
      call.on('data', (m: RouteResponse__Output) => responses.push(m));
      call.on('error', () => {});
      const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
      call.write(open([1]));
      await waitFor(() => responses.length === 1, 2_000, 'opened');
      const watched: string[] = [];
      const watch = health.Watch({ service: '' }, { deadline: Date.now() + 5_000 });
      watch.on('data', (r: { status: string }) => watched.push(r.status));
      watch.on('error', () => {});
      const watchEnded = new Promise((resolve) => watch.on('status', resolve));
      await waitFor(() => watched.length === 1, 2_000, 'health watch');
      await doomed.shutdown(2_000);
      await watchEnded;
      expect(watched).toEqual(['SERVING', 'NOT_SERVING']);
      expect((await status).code).toBe(grpc.status.UNAVAILABLE);
      expect(responses.at(-1)!.end).toMatchObject({ code: grpc.status.UNAVAILABLE, message: 'the shim is shutting down' });
      expect(doomed.store.count).toBe(0);
    } finally {
      client.close();
      health.close();
    }
  });
});
