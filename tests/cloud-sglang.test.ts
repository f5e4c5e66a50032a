/**
 * The `sglang` backend end to end: edge gRPC client → shim → HTTP → a fake SGLang server that answers
 * with the real cloud model, in every reply variant SGLANG_API.md lists.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import type { ShimConfig } from '../src/cloud/config.ts';
import { httpBackendError } from '../src/cloud/backends/http-backend-client.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { FakeSglang, type FakeSglangOptions } from './helpers/cloud-fake-sglang.ts';
import { EdgeContext, greedyReference, loadCloudModel, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

let model: DecoderModel;
let tokenizer: TextTokenizer;

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
}, 30_000);
afterAll(() => model.release());

/** A fake server, a shim pointing at it, and an edge client; all torn down afterwards. */
async function withSglang<T>(
  fakeOptions: FakeSglangOptions,
  shimOptions: Partial<ShimConfig>,
  fn: (ctx: { fake: FakeSglang; shim: ShimServer; client: GrpcCloudClient }) => Promise<T>,
): Promise<T> {
  const fake = new FakeSglang(model, tokenizer, fakeOptions);
  const shim = await startTestShim({ backend: 'sglang', backendUrl: fake.url, ...shimOptions });
  const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
  try {
    return await fn({ fake, shim, client });
  } finally {
    await client.close();
    await shim.shutdown();
    await fake.stop();
  }
}

/** Three routed steps with edge tokens in between; every reply must equal the model's greedy tokens. */
async function checkSteps(client: GrpcCloudClient, topLogprobs = 0): Promise<{ text: string[]; cached: number[]; contexts: number[][] }> {
  const edge = new EdgeContext([1, 403]);
  const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'sg' });
  const text: string[] = [];
  const cached: number[] = [];
  const contexts: number[][] = [];
  try {
    for (const [span, edgeIds] of [
      [3, [261]],
      [1, [376]],
      [2, []],
    ] as const) {
      edge.push(edgeIds, 'slm');
      const expected = await greedyReference(model, edge.ids, span);
      contexts.push([...edge.ids]);
      const reply = await conversation.next(edge.step({ maxTokens: span, topLogprobs }));
      expect(reply.tokens).toEqual(expected);
      expect(reply.logprobs.every((lp) => Number.isFinite(lp) && lp <= 0)).toBe(true);
      if (topLogprobs) expect(reply.topAlternatives.map((alts) => alts[0]!.id)).toEqual(expected);
      // Whatever the server sent (cumulative, delta, or no text at all), the step's text continues the context.
      expect(reply.text).toBe(tokenizer.decode([...edge.ids, ...expected]).slice(tokenizer.decode(edge.ids).length));
      text.push(reply.text);
      cached.push(reply.cachedTokens);
      edge.push(reply.tokens, 'llm');
    }
  } finally {
    await conversation.close();
  }
  return { text, cached, contexts };
}

describe('sglang backend', () => {
  test('non-streaming: exact greedy tokens, text, cached_tokens from the radix cache, documented request fields', async () => {
    await withSglang({}, {}, async ({ fake, client }) => {
      const { text, cached, contexts } = await checkSteps(client, 2);
      expect(text[0]).toBe(' time, there');
      // The whole context goes as input_ids every time; the radix cache serves the shared prefix.
      expect(fake.requests.map((r) => r.input_ids)).toEqual(contexts);
      expect(cached).toEqual([0, contexts[1]!.length - 1, contexts[2]!.length - 1]);
      const request = fake.requests[1]!;
      expect(request).toMatchObject({
        return_logprob: true,
        top_logprobs_num: 2,
        stream: false,
        sampling_params: { max_new_tokens: 1, temperature: 0, stop_token_ids: [2] },
      });
      expect(typeof request.rid).toBe('string');
      expect(new Set(fake.requests.map((r) => r.rid)).size).toBe(fake.requests.length);
    });
  });

  test('older builds without output_ids: ids come from output_token_logprobs', async () => {
    await withSglang({ idsField: 'none', noText: true }, {}, async ({ client }) => {
      const { text } = await checkSteps(client);
      expect(text[0]).toBe(' time, there'); // no text from the server: the shim decodes with the pack's tokenizer
    });
  });

  test('builds that name them token_ids', async () => {
    await withSglang({ idsField: 'token_ids' }, {}, async ({ client }) => {
      await checkSteps(client);
    });
  });

  for (const streamMode of ['cumulative', 'incremental', 'delta-ids-cumulative-text'] as const) {
    test(`streaming, ${streamMode} chunks`, async () => {
      await withSglang({ streamMode }, { backendStream: true }, async ({ fake, client }) => {
        const { text } = await checkSteps(client, 1);
        expect(text[0]).toBe(' time, there');
        expect(fake.requests[0]!.stream).toBe(true);
      });
    });
  }

  test('streaming from an old build (no output_ids, incremental)', async () => {
    await withSglang({ streamMode: 'incremental', idsField: 'none' }, { backendStream: true }, async ({ client }) => {
      await checkSteps(client);
    });
  });

  test('a request that hangs is aborted at its deadline: connection closed and /abort_request sent', async () => {
    await withSglang({ hang: true }, { backendTimeoutMs: 300 }, async ({ fake, shim, client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'hang' });
      const started = performance.now();
      expect(await rejectionCode(conversation.next(new EdgeContext([1]).step()))).toBe('DEADLINE_EXCEEDED');
      expect(performance.now() - started).toBeLessThan(2_000);
      await waitFor(() => fake.disconnects === 1 && fake.aborts.length === 1, 3_000, 'abort reaching the fake server');
      expect(fake.aborts[0]).toBe(fake.requests[0]!.rid as string);
      await conversation.close();
      expect(shim.store.count).toBe(0);
    });
  });

  test('the edge’s step deadline bounds the backend call too', async () => {
    await withSglang({ hang: true }, {}, async ({ fake, shim }) => {
      const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 250 });
      try {
        const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'edge-deadline' });
        expect(await rejectionCode(conversation.next(new EdgeContext([1]).step()))).toBe('DEADLINE_EXCEEDED');
        await waitFor(() => fake.disconnects === 1, 3_000, 'backend request aborted');
        await conversation.close();
      } finally {
        await client.close();
      }
    });
  });

  test('cancelling the generation aborts the backend request', async () => {
    await withSglang({ hang: true }, {}, async ({ fake, client }) => {
      const controller = new AbortController();
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'cancel', signal: controller.signal });
      const pending = conversation.next(new EdgeContext([1]).step());
      await waitFor(() => fake.requests.length === 1, 2_000, 'request reaching the fake server');
      controller.abort();
      expect(await rejectionCode(pending)).toBe('CANCELLED');
      await waitFor(() => fake.disconnects === 1 && fake.aborts.length === 1, 3_000, 'abort reaching the fake server');
      await conversation.close();
    });
  });

  test('a context longer than the model’s window: HTTP 400 becomes OUT_OF_RANGE with the server’s message', async () => {
    // No local window: the server is the one to refuse.
    await withSglang({}, { maxContext: 100_000 }, async ({ client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'long' });
      const error = await conversation.next(new EdgeContext(Array.from({ length: 600 }, () => 300)).step()).catch((e) => e);
      expect(error.code).toBe('OUT_OF_RANGE');
      expect(error.message).toContain("longer than the model's context length");
      await conversation.close();
    });
  });

  test('an error in the middle of a stream, and an abort finish reason, fail the step clearly', async () => {
    await withSglang({ streamError: 'CUDA out of memory' }, { backendStream: true }, async ({ client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'stream-error' });
      const error = await conversation.next(new EdgeContext([1]).step({ maxTokens: 4 })).catch((e) => e);
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toContain('CUDA out of memory');
      await conversation.close();
    });
    // The context-length error, reported in the stream instead of as a 400, is OUT_OF_RANGE all the same.
    await withSglang(
      { streamError: "The input (600 tokens) is longer than the model's context length (512 tokens)." },
      { backendStream: true },
      async ({ client }) => {
        const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'stream-too-long' });
        const error = await conversation.next(new EdgeContext([1]).step({ maxTokens: 4 })).catch((e) => e);
        expect(error.code).toBe('OUT_OF_RANGE');
        expect(error.message).toContain("longer than the model's context length");
        await conversation.close();
      },
    );
    await withSglang({ abortFinish: 'Abort by scheduler' }, {}, async ({ client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'abort-finish' });
      const error = await conversation.next(new EdgeContext([1]).step()).catch((e) => e);
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toContain('Abort by scheduler');
      await conversation.close();
    });
  });

  test('overload (503) is UNAVAILABLE; a server that cannot be reached too, after the retries', async () => {
    await withSglang(
      { httpError: { status: 503, body: { object: 'error', message: 'Server overloaded', type: 'Service Unavailable', param: null, code: 503 } } },
      {},
      async ({ client }) => {
        const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'overload' });
        const error = await conversation.next(new EdgeContext([1]).step()).catch((e) => e);
        expect(error.code).toBe('UNAVAILABLE');
        expect(error.message).toBe('sglang: HTTP 503: Server overloaded');
        await conversation.close();
      },
    );
    const closed = new FakeSglang(model, tokenizer);
    const url = closed.url;
    await closed.stop();
    const shim = await startTestShim({ backend: 'sglang', backendUrl: url, backendRetries: 2 });
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const error = await client
        .openConversation({ gate: CloudGate.OPEN, requestId: 'down' })
        .next(new EdgeContext([1]).step())
        .catch((e) => e);
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toContain('cannot reach');
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });
});

describe('HTTP error bodies', () => {
  test('every documented shape gives a clear message and the right code', () => {
    const cases: [number, unknown, string, string][] = [
      [400, { error: { message: "The input (600 tokens) is longer than the model's context length (512 tokens)." } }, 'OUT_OF_RANGE', 'longer than'],
      [400, { object: 'error', message: 'max_new_tokens must be ≥ 0', type: 'Bad Request', param: null, code: 400 }, 'INVALID_ARGUMENT', 'max_new_tokens'],
      [
        422,
        { detail: [{ loc: ['body', 'input_ids'], msg: 'field required', type: 'value_error.missing' }] },
        'INVALID_ARGUMENT',
        'body.input_ids: field required',
      ],
      [503, { object: 'error', message: 'overloaded', type: 'Service Unavailable', param: null, code: 503 }, 'UNAVAILABLE', 'overloaded'],
      [400, { error: { message: 'bad prompt', type: 'BadRequestError', code: 400 } }, 'INVALID_ARGUMENT', 'bad prompt'],
      [404, { detail: 'Not Found' }, 'FAILED_PRECONDITION', 'Not Found'],
      [500, 'Internal Server Error', 'INTERNAL', 'Internal Server Error'],
    ];
    for (const [status, body, code, text] of cases) {
      const error = httpBackendError('sglang', status, typeof body === 'string' ? body : JSON.stringify(body));
      expect(error.code).toBe(code as typeof error.code);
      expect(error.message).toContain(`sglang: HTTP ${status}: `);
      expect(error.message).toContain(text);
    }
  });
});
