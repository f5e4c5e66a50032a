/**
 * The lab's in-process cloud is the product's cloud path with the socket replaced: the same generation
 * through it and through the gRPC client to a real shim on loopback gives the same tokens and replies, and
 * the shim's own rules hold in process (step validation, the session store's skip rule, top_p 0, reply
 * text, the strict decoder on the serialized messages, cancellation and cleanup).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { interceptSteps, type CloudClient, type CloudStepReply } from '../src/edge/cloud/cloud-client.ts';
import { generate, type GenerationEvent, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest } from '../src/edge/request/generation-request.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';
import { EdgeContext, greedyReference, loadCloudModel, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

let edge: DecoderModel;
let cloudModel: DecoderModel;
let tokenizer: TextTokenizer;
let shim: ShimServer;
let grpcCloud: GrpcCloudClient;
let inProcess: InProcessCloud;

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  edge = await DecoderModel.load(loadModelPack(demo.edgePack));
  ({ model: cloudModel, tokenizer } = await loadCloudModel());
  shim = await startTestShim();
  grpcCloud = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 30_000 });
  inProcess = new InProcessCloud(cloudModel, { tokenizer });
}, 60_000);

afterAll(async () => {
  await inProcess.close();
  await grpcCloud.close();
  await shim.shutdown();
  await edge.release();
  await cloudModel.release();
});

/** Runs one generation through `cloud`, keeping every cloud reply. */
async function run(cloud: CloudClient, prompt: string, speculate: boolean) {
  const replies: CloudStepReply[] = [];
  const recording = interceptSteps(cloud, async (request, next) => {
    const reply = await next(request);
    replies.push(reply);
    return reply;
  });
  const engine = { edgeModel: edge, router: new TopProbabilityScorer(), tokenizer, cloud: recording };
  const events: GenerationEvent[] = [];
  const request = parseGenerationRequest({ prompt, mode: 'joint', threshold: 0.8, maxNewTokens: 32, routeSpan: 2, speculate });
  for await (const e of generate(engine, request)) events.push(e);
  const tokens = events.filter((e): e is TokenEvent => e.type === 'token').map((t) => `${t.id}:${t.source}`);
  return { tokens, replies };
}

test('the same generations through the in-process cloud and through gRPC to a real shim', async () => {
  let routed = 0;
  for (const prompt of ['Once upon a time, there was a little dog', 'Lily went to the park']) {
    for (const speculate of [false, true]) {
      const overGrpc = await run(grpcCloud, prompt, speculate);
      const inMemory = await run(inProcess, prompt, speculate);
      expect(inMemory.tokens).toEqual(overGrpc.tokens);
      expect(inMemory.replies.map((r) => [r.tokens, r.text, r.skipped ?? false])).toEqual(overGrpc.replies.map((r) => [r.tokens, r.text, r.skipped ?? false]));
      for (const [i, reply] of inMemory.replies.entries()) {
        // Both sides run the same pack with onnxruntime in this process; loaded twice, so compared with a tolerance.
        reply.logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(overGrpc.replies[i]!.logprobs[j]!, 4));
      }
      routed += inMemory.replies.filter((r) => !r.skipped).length;
    }
  }
  expect(routed).toBeGreaterThan(4);
  await waitFor(() => inProcess.store.count === 0, 2_000, 'sessions freed');
  expect(inProcess.openConversations).toBe(0);
}, 120_000);

describe("the shim's rules, in process", () => {
  test('steps are validated: a threshold outside [0, 1] or a span above the limit is INVALID_ARGUMENT', async () => {
    const context = new EdgeContext([1, 403]);
    for (const bad of [{ threshold: 1.5 }, { maxTokens: 65 }, { routerScore: Number.NaN }]) {
      const conversation = inProcess.openConversation({ gate: CloudGate.OPEN, requestId: 'invalid' });
      expect(await rejectionCode(conversation.next(context.step(bad)))).toBe('INVALID_ARGUMENT');
      await conversation.close();
    }
  });

  test("a conditional step is served when its guess was the reply, skipped by the session store's rule otherwise", async () => {
    const context = new EdgeContext([1, 403, 407]);
    const [reply, after] = await greedyReference(cloudModel, context.ids, 2);
    const conversation = inProcess.openConversation({ gate: CloudGate.OPEN, requestId: 'conditional' });
    const skippedBefore = inProcess.skipped;
    try {
      const first = conversation.next(context.step());
      const wrong = conversation.next({ ...context.step(), context: [...context.ids, reply! + 1], sources: [...context.sources, 'slm'], conditional: true });
      expect((await first).tokens).toEqual([reply!]);
      expect((await wrong).skipped).toBe(true);
      context.push([reply!], 'llm');
      const second = conversation.next(context.step());
      const [third] = await greedyReference(cloudModel, [...context.ids, after!], 1);
      const right = conversation.next({ ...context.step(), context: [...context.ids, after!], sources: [...context.sources, 'slm'], conditional: true });
      expect((await second).tokens).toEqual([after!]);
      expect(await right).toMatchObject({ tokens: [third!] });
      expect(inProcess.skipped - skippedBefore).toBe(1);
    } finally {
      await conversation.close();
    }
  });

  test('top_p 0 is read as 1 (no nucleus), as the shim reads it', async () => {
    const sampled = async (topP: number) => {
      const context = new EdgeContext([1, 403]);
      const conversation = inProcess.openConversation({ gate: CloudGate.OPEN, requestId: `top-p-${topP}` });
      try {
        for (let i = 0; i < 12; i++) context.push((await conversation.next(context.step({ temperature: 1, topP, seed: 11 + i }))).tokens, 'llm');
      } finally {
        await conversation.close();
      }
      return context.ids;
    };
    const unbounded = await sampled(1);
    expect(await sampled(0)).toEqual(unbounded);
    expect(unbounded.slice(2)).not.toEqual(await greedyReference(cloudModel, [1, 403], 12));
  });

  test("reply text is the shim's span text; a cloud without a tokenizer sends none", async () => {
    const context = new EdgeContext([1, 403]);
    const [id] = await greedyReference(cloudModel, context.ids, 1);
    const conversation = inProcess.openConversation({ gate: CloudGate.OPEN, requestId: 'text' });
    // The span continues "Once": decoded after the context, its text has the space a lone decode drops.
    expect(tokenizer.decode([id!])).toBe('upon');
    expect((await conversation.next(context.step())).text).toBe(' upon');
    await conversation.close();
    const mute = new InProcessCloud(cloudModel, { record: false });
    const quiet = mute.openConversation({ gate: CloudGate.OPEN, requestId: 'no-text' });
    expect(await quiet.next(context.step())).toMatchObject({ tokens: [id!], text: '' });
    await quiet.close();
    await mute.close();
  });

  test('messages cross the proto: a request id that is not valid UTF-8 on the wire is INVALID_ARGUMENT', async () => {
    const conversation = inProcess.openConversation({ gate: CloudGate.OPEN, requestId: 'lone surrogate \uD800' });
    expect(await rejectionCode(conversation.next(new EdgeContext([1, 403]).step()))).toBe('INVALID_ARGUMENT');
    await conversation.close();
  });

  test('a cancelled step ends its session on the shim side; a closed cloud refuses new steps', async () => {
    const controller = new AbortController();
    const cloud = new InProcessCloud(cloudModel, { record: false });
    const conversation = cloud.openConversation({ gate: CloudGate.OPEN, requestId: 'cancel', signal: controller.signal });
    const context = new EdgeContext([1, 403]);
    const step = conversation.next(context.step({ maxTokens: 32 }));
    await waitFor(() => cloud.store.count === 1, 2_000, 'session open');
    controller.abort();
    expect(await rejectionCode(step)).toBe('CANCELLED');
    await waitFor(() => cloud.store.count === 0, 2_000, 'session freed');
    await conversation.close();
    await cloud.close();
    const late = cloud.openConversation({ gate: CloudGate.OPEN, requestId: 'late' });
    expect(await rejectionCode(late.next(context.step()))).toBe('FAILED_PRECONDITION');
  });
});
