/**
 * Routed steps beside a flood of Score calls, on a real shim (port 0, embedded backend, the stories260K cloud
 * pack) through the edge's gRPC client: Score work runs in turns of the step admission's batch lane, one
 * chunk of its forward passes at a time, so steps are admitted while Score holds a slot, Score never takes a
 * step's last slot, every step is answered with a token (none overloaded), and the scores are still the
 * in-process figures to the bit. Ordering and admission are asserted, never speed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { CloudRouterClient, type ScoreRequest, type ScoreResponse__Output } from '../src/shared/grpc/proto.ts';
import { SCORE_CHUNK_TOKENS, scoreOnModel } from '../src/shared/model/position-scores.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { EdgeContext, loadCloudModel, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

/** Two slots: a turn may hold one, and the other is always left to a step. */
const SLOTS = 2;
const FLOODERS = 6;
const STEPS = 24;

let model: DecoderModel;
let tokenizer: TextTokenizer;
let shim: ShimServer;
let scorer: InstanceType<typeof CloudRouterClient>;

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
  shim = await startTestShim({ maxInflightSteps: SLOTS });
  scorer = new CloudRouterClient(shim.address, grpc.credentials.createInsecure());
}, 30_000);

afterAll(async () => {
  scorer.close();
  await shim.shutdown();
  await model.release();
});

function score(request: ScoreRequest): Promise<ScoreResponse__Output> {
  return new Promise((resolve, reject) =>
    scorer.Score(request, { deadline: Date.now() + 60_000 }, (error, reply) => (error ? reject(error) : resolve(reply!))),
  );
}

/** A full window of real text: the longest sequence one Score call may hold. */
function windowOfText(): number[] {
  const sentence = tokenizer.encode(' Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog.', { addBos: false });
  const ids = [1];
  while (ids.length < model.pack.maxPositions) ids.push(...sentence);
  return ids.slice(0, model.pack.maxPositions);
}

describe('routed steps during a Score flood', () => {
  test('every step is answered beside the Score turns, which never hold the last slot; the scores are the in-process ones', async () => {
    const ids = windowOfText();
    const request: ScoreRequest = { ids, topK: 5, requestId: 'flood' };
    // The admission as the shim's own event loop sees it, sampled while everything runs.
    let mostTurnsHeld = 0;
    const sampler = setInterval(() => (mostTurnsHeld = Math.max(mostTurnsHeld, shim.admission.batchLoad().held)), 1);
    let flooding = true;
    const replies: ScoreResponse__Output[] = [];
    const flood = Array.from({ length: FLOODERS }, async () => {
      while (flooding) replies.push(await score(request));
    });
    const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 30_000 });
    const answered: number[] = [];
    try {
      await waitFor(() => shim.admission.batchLoad().held > 0, 10_000, 'Score to hold a slot');
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'beside-the-flood' });
      const edge = new EdgeContext([1, 403, 407]);
      for (let i = 0; i < STEPS; i++) {
        const reply = await conversation.next(edge.step());
        expect(reply.overloaded).toBeFalsy();
        answered.push(reply.tokens.length);
        edge.push(reply.tokens, 'llm');
      }
      await conversation.close();
    } finally {
      flooding = false;
      clearInterval(sampler);
      await Promise.all(flood);
      await client.close();
    }
    expect(answered).toEqual(new Array(STEPS).fill(1));
    expect(shim.admission.overloaded).toBe(0);
    const turns = shim.admission.batchLoad();
    // Steps started while Score held a slot (they did not wait for the flood), and Score never held the last one.
    expect(turns.stepsBesideBatch).toBeGreaterThan(0);
    expect(mostTurnsHeld).toBe(SLOTS - 1);
    // Each call ran as one turn per chunk of its forward passes, and all of them have ended.
    expect(turns.granted).toBe(replies.length * Math.ceil((ids.length - 1) / SCORE_CHUNK_TOKENS));
    expect(turns).toMatchObject({ held: 0, waiting: 0 });
    const reference = await scoreOnModel(model, ids, { topK: 5 });
    for (const reply of replies) expect(reply.positions).toEqual(reference);
  }, 120_000);
});
