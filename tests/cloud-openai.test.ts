/**
 * The `openai` backend end to end: edge gRPC client → shim → `POST /v1/completions` on a fake
 * OpenAI-compatible server answering with the real cloud model.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimConfig } from '../src/cloud/config.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { logSoftmax, topK } from '../src/shared/model/logits.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { FakeOpenAi, type FakeOpenAiOptions } from './helpers/cloud-fake-openai.ts';
import { EdgeContext, greedyReference, loadCloudModel, referenceLogits, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

let model: DecoderModel;
let tokenizer: TextTokenizer;

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
}, 30_000);
afterAll(() => model.release());

async function withOpenAi<T>(
  fakeOptions: FakeOpenAiOptions,
  shimOptions: Partial<ShimConfig>,
  fn: (ctx: { fake: FakeOpenAi; shim: ShimServer; client: GrpcCloudClient }) => Promise<T>,
): Promise<T> {
  const fake = new FakeOpenAi(model, tokenizer, fakeOptions);
  const shim = await startTestShim({ backend: 'openai', backendUrl: fake.url, backendModel: 'stories260k', ...shimOptions });
  const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
  try {
    return await fn({ fake, shim, client });
  } finally {
    await client.close();
    await shim.shutdown();
    await fake.stop();
  }
}

async function steps(client: GrpcCloudClient, topLogprobs = 0) {
  const edge = new EdgeContext([1, 403]);
  const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'oa' });
  const replies = [];
  try {
    for (const [span, edgeIds] of [
      [3, [261]],
      [2, [376]],
    ] as const) {
      edge.push(edgeIds, 'slm');
      const expected = await greedyReference(model, edge.ids, span);
      const reply = await conversation.next(edge.step({ maxTokens: span, topLogprobs }));
      expect(reply.tokens).toEqual(expected);
      replies.push({ reply, context: [...edge.ids] });
      edge.push(reply.tokens, 'llm');
    }
  } finally {
    await conversation.close();
  }
  return replies;
}

describe('openai backend', () => {
  test('token-id prompt, ids from token_ids, logprobs, cached tokens from usage', async () => {
    await withOpenAi({}, {}, async ({ fake, client }) => {
      const replies = await steps(client, 2);
      expect(fake.requests[0]).toMatchObject({
        model: 'stories260k',
        prompt: [1, 403, 261],
        max_tokens: 3,
        temperature: 0,
        logprobs: 2,
        return_token_ids: true,
        stop_token_ids: [2],
      });
      // The routing key (the request id here) as a header, for a gateway in front of several servers; not in the body.
      expect(fake.routingKeys).toEqual(['oa', 'oa']);
      expect(fake.requests[0]!.routing_key).toBeUndefined();
      expect(replies[0]!.reply.text).toBe(' time, there');
      expect(replies[1]!.reply.cachedTokens).toBe(replies[1]!.context.length - 1);
      const expected = logSoftmax(await referenceLogits(model, replies[0]!.context));
      expect(replies[0]!.reply.logprobs[0]).toBeCloseTo(expected[replies[0]!.reply.tokens[0]!]!, 4);
    });
  });

  test('streaming chunks with delta token_ids, and the usage chunk', async () => {
    await withOpenAi({}, { backendStream: true }, async ({ fake, client }) => {
      const replies = await steps(client);
      expect(fake.requests[0]).toMatchObject({ stream: true, stream_options: { include_usage: true } });
      expect(replies[1]!.reply.cachedTokens).toBe(replies[1]!.context.length - 1);
      expect(replies[0]!.reply.text).toBe(' time, there');
    });
  });

  test('vLLM token_id:<id> strings give ids and alternatives, N+1 top entries are cut to N', async () => {
    await withOpenAi({ tokenIds: false, tokenIdStrings: true, extraTopEntry: true, errors: 'vllm' }, {}, async ({ client }) => {
      const replies = await steps(client, 2);
      const context = replies[0]!.context;
      const expected = topK(logSoftmax(await referenceLogits(model, context)), 2);
      expect(replies[0]!.reply.topAlternatives[0]!.map((a) => a.id)).toEqual(expected.map((t) => t.id));
      expect(replies[0]!.reply.topAlternatives.every((alts) => alts.length === 2)).toBe(true);
    });
  });

  test('a server that returns text only is a clear FAILED_PRECONDITION, not a guess', async () => {
    await withOpenAi({ tokenIds: false }, {}, async ({ client }) => {
      const error = await client
        .openConversation({ gate: CloudGate.OPEN, requestId: 'text-only' })
        .next(new EdgeContext([1]).step())
        .catch((e) => e);
      expect(error.code).toBe('FAILED_PRECONDITION');
      expect(error.message).toContain('return_token_ids');
    });
  });

  test('…unless re-tokenizing is configured (lossy, but here the text round-trips)', async () => {
    await withOpenAi({ tokenIds: false }, { openaiRetokenize: true }, async ({ client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'retokenize' });
      const edge = new EdgeContext([1, 403, 407, 261]);
      const reply = await conversation.next(edge.step({ maxTokens: 1 }));
      expect(reply.tokens).toEqual(await greedyReference(model, edge.ids, 1));
      await conversation.close();
    });
  });

  test('a request that hangs is aborted at the backend deadline: the connection is closed', async () => {
    await withOpenAi({ hang: true }, { backendTimeoutMs: 300 }, async ({ fake, shim, client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'oa-hang' });
      expect(await rejectionCode(conversation.next(new EdgeContext([1]).step()))).toBe('DEADLINE_EXCEEDED');
      await waitFor(() => fake.disconnects === 1, 3_000, 'backend connection closed');
      await conversation.close();
      expect(shim.store.count).toBe(0);
    });
  });

  test('cancelling the generation closes the backend request', async () => {
    await withOpenAi({ hang: true }, {}, async ({ fake, client }) => {
      const controller = new AbortController();
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'oa-cancel', signal: controller.signal });
      const pending = conversation.next(new EdgeContext([1]).step());
      await waitFor(() => fake.requests.length === 1, 2_000, 'request reaching the fake server');
      controller.abort();
      expect(await rejectionCode(pending)).toBe('CANCELLED');
      await waitFor(() => fake.disconnects === 1, 3_000, 'backend connection closed');
      await conversation.close();
    });
  });

  test("an error in the middle of a stream fails the step with the server's message", async () => {
    await withOpenAi({ streamError: 'CUDA out of memory' }, { backendStream: true }, async ({ client }) => {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'oa-stream-error' });
      const error = await conversation.next(new EdgeContext([1]).step({ maxTokens: 4 })).catch((e) => e);
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toContain('CUDA out of memory');
      await conversation.close();
    });
  });

  test('error bodies in both styles become clear errors', async () => {
    for (const errors of ['sglang', 'vllm'] as const) {
      await withOpenAi({ errors, fail: 'prompt is too silly' }, {}, async ({ client }) => {
        const error = await client
          .openConversation({ gate: CloudGate.OPEN, requestId: 'err' })
          .next(new EdgeContext([1]).step())
          .catch((e) => e);
        expect(error.code).toBe('INVALID_ARGUMENT');
        expect(error.message).toBe('openai: HTTP 400: prompt is too silly');
      });
    }
  });
});
