/**
 * The shim holds peers to the contract (proto/cloud_router.proto): stop ids must be in the vocabulary,
 * a step carries generated tokens only, and every stream it ends itself ends with `end`, even when the
 * reply would be too large to send. The one stream without `end` (a request over the size limit, refused
 * by grpc-js before the shim reads it) is pinned here too, as the proto documents it. Raw streams to a
 * real shim on loopback, with the stories260K cloud pack (vocabulary 512).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { serializeRouteRequest, type RouteRequest } from '../src/shared/grpc/proto.ts';
import { startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { rawRouteStream } from './helpers/raw-route-stream.ts';

let shim: ShimServer;
/** A shim whose message limit is the smallest allowed, 1 KiB. */
let small: ShimServer;

beforeAll(async () => {
  [shim, small] = await Promise.all([startTestShim(), startTestShim({ maxMessageBytes: 1024 })]);
}, 30_000);

afterAll(async () => {
  await Promise.all([shim.shutdown(), small.shutdown()]);
});

/** Writes `messages` on one Route stream, half-closes, and returns what came back and the status. */
const rawStream = (messages: RouteRequest[], target = shim) => rawRouteStream(target.address, messages);

const open = (stopTokenIds: number[] = [], topLogprobs = 0): RouteRequest => ({
  open: { requestId: 'contract', sampling: { temperature: 0, stopTokenIds, topLogprobs }, contextIds: [1] },
});

describe('stop_token_ids', () => {
  test('an id outside the vocabulary is INVALID_ARGUMENT naming it, in open', async () => {
    const { responses, status } = await rawStream([open([2, 512])]);
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toBe('stop_token_ids holds token id 512 (index 1), outside the vocabulary [0, 512)');
    expect(responses.map((r) => r.message)).toEqual(['end']);
    expect(responses[0]!.end!.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  test('and in a step that changes the sampling', async () => {
    const step = { offset: 1, ids: [], sources: [], sampling: { temperature: 0, stopTokenIds: [70_000] } };
    const { responses, status } = await rawStream([open([2]), { step }]);
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toBe('stop_token_ids holds token id 70000 (index 0), outside the vocabulary [0, 512)');
    expect(responses.map((r) => r.message)).toEqual(['opened', 'end']);
  });

  test('the last id of the vocabulary is accepted', async () => {
    const { responses, status } = await rawStream([open([511]), { step: { offset: 1, ids: [], sources: [] } }]);
    expect(status.code).toBe(grpc.status.OK);
    expect(responses.map((r) => r.message)).toEqual(['opened', 'step', 'end']);
  });
});

describe('sources inside a step', () => {
  test('TOKEN_SOURCE_PROMPT is INVALID_ARGUMENT naming its index; the session is freed', async () => {
    const sources = ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_PROMPT'] as const;
    const { responses, status } = await rawStream([open(), { step: { offset: 1, ids: [403, 407], sources: [...sources] } }]);
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toBe(
      'sources[1] is TOKEN_SOURCE_PROMPT: a step or extend carries generated tokens only (slm, llm, fallback); prompt tokens belong in open.context_ids',
    );
    expect(responses.map((r) => r.message)).toEqual(['opened', 'end']);
    await waitFor(() => shim.store.count === 0, 2_000, 'session freed');
  });

  test('SLM, LLM and FALLBACK are accepted', async () => {
    const step = { offset: 1, ids: [403, 407, 261], sources: ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_LLM', 'TOKEN_SOURCE_FALLBACK'] as const };
    const { responses, status } = await rawStream([open(), { step: { ...step, sources: [...step.sources] } }]);
    expect(status.code).toBe(grpc.status.OK);
    expect(responses.map((r) => r.message)).toEqual(['opened', 'step', 'end']);
    expect(responses[1]!.step!.contextLength).toBe(5);
  });
});

describe('messages over the size limit', () => {
  test('a reply too large to send: `end` with RESOURCE_EXHAUSTED and the sizes, then the same status; the session is freed', async () => {
    // 16 tokens with 20 alternatives each serialize to about 2.3 KB, over the 1 KiB limit.
    const { responses, status } = await rawStream([open([], 20), { step: { offset: 1, ids: [], sources: [], maxTokens: 16 } }], small);
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status.details).toMatch(
      /^the step result is \d+ bytes, above this shim's gRPC message limit of 1024: ask for fewer tokens \(max_tokens\) or alternatives \(top_logprobs\)$/,
    );
    expect(responses.map((r) => r.message)).toEqual(['opened', 'end']);
    expect(responses[1]!.end).toMatchObject({
      code: grpc.status.RESOURCE_EXHAUSTED,
      message: status.details,
      steps: 1,
      generatedTokens: 16,
      contextTokens: 17,
    });
    await waitFor(() => small.store.count === 0, 2_000, 'session freed');
  });

  test('the same step with fewer alternatives fits and is answered', async () => {
    const { responses, status } = await rawStream([open([], 2), { step: { offset: 1, ids: [], sources: [], maxTokens: 4 } }], small);
    expect(status.code).toBe(grpc.status.OK);
    expect(responses.map((r) => r.message)).toEqual(['opened', 'step', 'end']);
  });

  test('a request over the limit is refused by grpc-js before the shim reads it: bare RESOURCE_EXHAUSTED, no `end` (as the proto says)', async () => {
    const big: RouteRequest = { step: { offset: 1, ids: [403], sources: ['TOKEN_SOURCE_SLM'], slmHiddenState: Array<number>(512).fill(0.5) } };
    expect(serializeRouteRequest(big).length).toBeGreaterThan(1024);
    const { responses, status } = await rawStream([open(), big], small);
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status.details).toMatch(/^Received message larger than max/);
    expect(responses.map((r) => r.message).filter((m) => m === 'end')).toEqual([]);
    await waitFor(() => small.store.count === 0, 2_000, 'session freed');
  });
});
