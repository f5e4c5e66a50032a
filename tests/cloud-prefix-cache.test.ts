/**
 * Prefix reuse across sessions in the cloud: the embedded backend with a prefix cache starts a new
 * session from an ended one's cache (a chat's next turn, a shared head) and returns the model's greedy
 * tokens all the same; through the shim, a new conversation reports the reused tokens in cachedTokens.
 * Against the SGLang fake, whose radix cache stands for SGLang's, cached_tokens rises turn after turn.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { BackendSequence, BackendStepRequest } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { FakeSglang } from './helpers/cloud-fake-sglang.ts';
import { cloudPackDir, EdgeContext, greedyReference, loadCloudModel, startTestShim } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

let model: DecoderModel;
let tokenizer: TextTokenizer;

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
}, 30_000);
afterAll(() => model.release());

function stepRequest(context: readonly number[], maxTokens: number): BackendStepRequest {
  return {
    context,
    maxTokens,
    sampling: { temperature: 0, topP: 1, seed: 1, stopTokenIds: [], topLogprobs: 0 },
    requestId: crypto.randomUUID(),
    signal: new AbortController().signal,
  };
}

function ids(n: number, offset: number): number[] {
  return Array.from({ length: n }, (_, i) => 3 + ((i * 13 + offset) % 250));
}

describe('embedded backend across sessions', () => {
  test("a chat's next turn and a shared head start from an ended session's cache; the same greedy tokens", async () => {
    const backend = await EmbeddedBackend.load({ modelPack: await cloudPackDir(), maxLiveSequences: 4, prefixCacheBytes: 16 * 2 ** 20 });
    const step = async (context: number[], maxTokens: number) => {
      const session: BackendSequence = backend.openSequence();
      try {
        return await session.step(stepRequest(context, maxTokens));
      } finally {
        session.dispose();
      }
    };
    try {
      const turn1 = [1, ...ids(40, 1)];
      const first = await step(turn1, 6);
      expect(first.ids).toEqual(await greedyReference(model, turn1, 6));
      expect(first.cachedTokens).toBe(0);

      // The ended session held turn1 and the first five of its six tokens (the span's last one is never fed).
      const turn2 = [...turn1, ...first.ids, ...ids(12, 2)];
      const second = await step(turn2, 6);
      expect(second.cachedTokens).toBe(turn1.length + 5);
      expect(second.ids).toEqual(await greedyReference(model, turn2, 6));

      // Another conversation with the same head (turn1's first 30 ids) reuses just that.
      const other = [...turn1.slice(0, 30), ...ids(10, 3)];
      const third = await step(other, 4);
      expect(third.cachedTokens).toBe(30);
      expect(third.ids).toEqual(await greedyReference(model, other, 4));
      expect(backend.prefixCache!.stats.hitTokens).toBe(turn1.length + 5 + 30);
    } finally {
      await backend.close();
    }
    expect(model.stats.liveSequences).toBe(0);
  });

  test('without a prefix cache a new session prefills its whole context', async () => {
    const backend = await EmbeddedBackend.load({ modelPack: await cloudPackDir(), maxLiveSequences: 4 });
    try {
      const context = [1, ...ids(20, 4)];
      for (let i = 0; i < 2; i++) {
        const session = backend.openSequence();
        expect((await session.step(stepRequest(context, 2))).cachedTokens).toBe(0);
        session.dispose();
      }
      expect(backend.prefixCache).toBeUndefined();
    } finally {
      await backend.close();
    }
  });

  test("through the shim: a new conversation (the chat's next turn) reports the reused tokens", async () => {
    const shim = await startTestShim({ prefixCacheMb: 16 });
    const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
    try {
      const edge = new EdgeContext([1, ...ids(30, 5)]);
      const turn1 = client.openConversation({ gate: CloudGate.OPEN, requestId: 'turn-1' });
      const reply1 = await turn1.next(edge.step({ maxTokens: 3 }));
      expect(reply1.cachedTokens).toBe(0);
      await turn1.close();
      edge.push(reply1.tokens, 'llm');
      edge.push(ids(8, 6), 'slm');
      const turn2 = client.openConversation({ gate: CloudGate.OPEN, requestId: 'turn-2' });
      const reply2 = await turn2.next(edge.step({ maxTokens: 2 }));
      await turn2.close();
      // Turn 1's context and the first two of its three tokens.
      expect(reply2.cachedTokens).toBe(31 + 2);
      expect(reply2.tokens).toEqual(await greedyReference(model, edge.ids, 2));
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });
});

describe('sglang backend across turns', () => {
  test("cached_tokens rises with a chat's turns: each new conversation resends the history, the radix cache serves it", async () => {
    const fake = new FakeSglang(model, tokenizer);
    const shim = await startTestShim({ backend: 'sglang', backendUrl: fake.url });
    const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
    try {
      const edge = new EdgeContext([1, ...ids(10, 7)]);
      const cached: number[] = [];
      for (let turn = 0; turn < 4; turn++) {
        const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `turn-${turn}` });
        const before = edge.ids.length;
        const reply = await conversation.next(edge.step({ maxTokens: 3 }));
        await conversation.close();
        cached.push(reply.cachedTokens);
        // The radix cache held everything sent and generated before this turn's new words.
        if (turn > 0) expect(reply.cachedTokens).toBe(before - 5);
        edge.push(reply.tokens, 'llm');
        edge.push(ids(5, 8 + turn), 'slm');
      }
      expect(cached[0]).toBe(0);
      for (let i = 1; i < cached.length; i++) expect(cached[i]!).toBeGreaterThan(cached[i - 1]!);
    } finally {
      await client.close();
      await shim.shutdown();
      await fake.stop();
    }
  });
});
