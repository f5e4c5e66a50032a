/**
 * Conditional steps end to end: the decoding loop with speculation, the edge's gRPC client and a real shim
 * on loopback whose backend takes 30 ms a step, so that a second routed position's step goes out while the
 * first is on the stream. The decisions must be those of the loop without speculation over the same shim.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Backend } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import type { CloudClient } from '../src/edge/cloud/cloud-client.ts';
import { generate, type DoneEvent, type GenerationEvent, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest } from '../src/edge/request/generation-request.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { recordingSteps } from './helpers/step-recording.ts';

let edge: DecoderModel;
let tokenizer: TextTokenizer;
let shim: ShimServer;
let grpcCloud: GrpcCloudClient;

/** `inner` with every step held `ms` first, on the shim's side of the stream. */
function slowBackend(inner: Backend, ms: number): Backend {
  return {
    info: inner.info,
    openSequence(sessionId) {
      const sequence = inner.openSequence(sessionId);
      return { step: async (request) => (await Bun.sleep(ms), sequence.step(request)), dispose: () => sequence.dispose() };
    },
    close: () => inner.close(),
  };
}

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  edge = await DecoderModel.load(loadModelPack(demo.edgePack));
  tokenizer = await TextTokenizer.fromPack(demo.edgePack);
  const backend = await EmbeddedBackend.load({ modelPack: demo.cloudPack, maxLiveSequences: 16 });
  shim = await startTestShim({}, { backend: slowBackend(backend, 30) });
  grpcCloud = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 });
}, 30_000);

afterAll(async () => {
  await grpcCloud.close();
  await shim.shutdown();
  await edge.release();
});

async function run(prompt: string, threshold: number, speculate: boolean, cloud: CloudClient) {
  const engine = { edgeModel: edge, router: new TopProbabilityScorer(), tokenizer, cloud };
  const events: GenerationEvent[] = [];
  for await (const e of generate(engine, parseGenerationRequest({ prompt, mode: 'joint', threshold, maxNewTokens: 24, speculate }))) events.push(e);
  const tokens = events.filter((e): e is TokenEvent => e.type === 'token');
  return { decisions: tokens.map((t) => `${t.id}:${t.source}:${t.score}`), done: events.at(-1) as DoneEvent };
}

test('through a real shim: the same decisions with conditional steps, some served and some skipped', async () => {
  const totals = { conditional: 0, skipped: 0, metric: 0, fallback: 0, maxInFlight: 0 };
  for (const prompt of ['Once upon a time, there was a little dog', 'Lily went to the park', 'Tom had a big red ball. One day']) {
    for (const threshold of [0.85, 0.95]) {
      const off = await run(prompt, threshold, false, grpcCloud);
      const { client, counts } = recordingSteps(grpcCloud);
      const on = await run(prompt, threshold, true, client);
      // A skipped reply behind the last routed position may come after the generation ended.
      await waitFor(() => counts.inFlight === 0, 2_000, 'replies in');
      expect(on.decisions).toEqual(off.decisions);
      expect(on.done.text).toBe(off.done.text);
      totals.conditional += counts.conditional;
      totals.skipped += counts.skipped;
      totals.maxInFlight = Math.max(totals.maxInFlight, counts.maxInFlight);
      totals.metric += on.done.metrics.conditionalSteps;
      totals.fallback += on.done.metrics.fallback + off.done.metrics.fallback;
    }
  }
  expect(totals.fallback).toBe(0);
  expect(totals.conditional).toBeGreaterThan(0);
  // Two steps on the stream at once: the pipelining happened over gRPC, not only in the loop.
  expect(totals.maxInFlight).toBe(2);
  expect(totals.metric).toBe(totals.conditional);
  expect(totals.skipped).toBeGreaterThan(0);
  expect(totals.skipped).toBeLessThan(totals.conditional);
  await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
}, 120_000);
