/**
 * The Score call through a real shim on loopback, backed by the fake SGLang and OpenAI-compatible servers,
 * which compute prompt log-probabilities with the real stories260K cloud model. Each answer is compared with
 * `scoreRows` over the same model in this process (the embedded backend's arithmetic): the same top ids, and
 * log-probabilities within SCORE_TOLERANCE (both sides run the same fp32 ONNX model, so they agree to
 * rounding). A candidate a server could not name comes back as a bound: never below the true figure.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { ShimConfig } from '../src/cloud/config.ts';
import { CloudRouterClient, type ScoreRequest, type ScoreResponse__Output } from '../src/shared/grpc/proto.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { scoreRows, type PositionScores } from '../src/shared/model/position-scores.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { FakeOpenAi, type FakeOpenAiOptions } from './helpers/cloud-fake-openai.ts';
import { FakeSglang, type FakeSglangOptions } from './helpers/cloud-fake-sglang.ts';
import { loadCloudModel, startTestShim } from './helpers/cloud-fixture.ts';

/** Absolute, in nats: what two fp32 runs of one model may differ by after float32 rounding. */
const SCORE_TOLERANCE = 1e-5;
const TOP_K = 5;

let model: DecoderModel;
let tokenizer: TextTokenizer;
let ids: number[];
/** The reference with the top 60, to pick candidates of every rank from. */
let wide: PositionScores[];
/** Per position: the next id, the top-1, the 3rd most likely, and one ranked 40th (outside any top-k asked). */
let candidates: number[];

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
  ids = tokenizer.encode('Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog.', { addBos: true });
  wide = await reference(ids, { topK: 60 });
  candidates = wide.map((p, i) => [ids[i + 1]!, p.topIds[0]!, p.topIds[2]!, p.topIds[39]!][i % 4]!);
}, 30_000);
afterAll(() => model.release());

async function reference(sequence: number[], options: { candidates?: number[]; topK?: number }): Promise<PositionScores[]> {
  const run = model.newSequence();
  try {
    const out = await run.append(sequence, { allPositions: true });
    return scoreRows(out.allLogits!, model.pack.vocabSize, sequence, options);
  } finally {
    run.dispose();
  }
}

type Fake = FakeSglang | FakeOpenAi;

async function withShim<T>(
  fake: Fake,
  shimOptions: Partial<ShimConfig>,
  fn: (score: (request: ScoreRequest) => Promise<ScoreResponse__Output>) => Promise<T>,
): Promise<T> {
  const backend: Partial<ShimConfig> = fake instanceof FakeSglang ? { backend: 'sglang' } : { backend: 'openai', backendModel: 'stories260k' };
  const shim = await startTestShim({ ...backend, backendUrl: fake.url, ...shimOptions });
  const client = new CloudRouterClient(shim.address, grpc.credentials.createInsecure());
  const score = (request: ScoreRequest) =>
    new Promise<ScoreResponse__Output>((resolve, reject) => {
      client.Score(request, { deadline: Date.now() + 20_000 }, (error, reply) => (error ? reject(error) : resolve(reply!)));
    });
  try {
    return await fn(score);
  } finally {
    client.close();
    await shim.shutdown();
    await fake.stop();
  }
}

const sglang = (options: FakeSglangOptions = {}) => new FakeSglang(model, tokenizer, options);
const openai = (options: FakeOpenAiOptions = {}) => new FakeOpenAi(model, tokenizer, options);

function expectClose(actual: number, expected: number, where: string): void {
  if (actual === expected) return;
  expect({ where, difference: Math.abs(actual - expected) <= SCORE_TOLERANCE }).toEqual({ where, difference: true });
}

/**
 * Every figure against the reference. Where `exactCandidates` is false, a candidate outside the top-k may
 * be a bound: then it is the k-th largest figure (the smallest the server returned) and at least the true one.
 */
function checkScores(reply: ScoreResponse__Output, expected: PositionScores[], topK: number, exactCandidates: boolean): { bounded: number } {
  expect(reply.positions.length).toBe(expected.length);
  let bounded = 0;
  reply.positions.forEach((got, i) => {
    const want = expected[i]!;
    expect(got.topIds).toEqual(want.topIds);
    got.topLogprobs.forEach((lp, r) => expectClose(lp, want.topLogprobs[r]!, `top ${r} at ${i}`));
    expectClose(got.nextLogprob, want.nextLogprob, `next at ${i}`);
    const candidate = candidates[i]!;
    const named = candidate === ids[i + 1] || wide[i]!.topIds.indexOf(candidate) < Math.max(topK, 1);
    if (exactCandidates || named) expectClose(got.candidateLogprob, want.candidateLogprob, `candidate at ${i}`);
    else {
      bounded++;
      expect(got.candidateLogprob).toBeGreaterThanOrEqual(want.candidateLogprob - SCORE_TOLERANCE);
      expectClose(got.candidateLogprob, wide[i]!.topLogprobs[Math.max(topK, 1) - 1]!, `bound at ${i}`);
    }
  });
  expect(reply.exact).toBe(bounded === 0);
  return { bounded };
}

describe('Score through the sglang backend', () => {
  test('current build: every figure the model’s own (token_ids_logprob), one /generate per call with no new tokens', async () => {
    const fake = sglang();
    await withShim(fake, {}, async (score) => {
      const expected = await reference(ids, { candidates, topK: TOP_K });
      const reply = await score({ ids, candidateIds: candidates, topK: TOP_K, requestId: 'score-1' });
      checkScores(reply, expected, TOP_K, true);
      expect(reply.exact).toBe(true);
      expect(reply.backend).toBe(`sglang:${fake.url}`);
      // One short of the context: SGLang refuses a prompt as long as it (BackendInfo.maxScoreTokens).
      expect(reply.maxContext).toBe(model.pack.maxPositions - 1);
      expect(fake.requests).toHaveLength(1);
      expect(fake.requests[0]).toEqual({
        input_ids: ids,
        sampling_params: { max_new_tokens: 0, temperature: 0 },
        return_logprob: true,
        logprob_start_len: 0,
        top_logprobs_num: TOP_K,
        token_ids_logprob: [...new Set(candidates)],
        rid: 'score-1',
        stream: false,
      });

      // No candidates, no top-k: the next id's figure only, and nothing extra asked of the server.
      const plain = await score({ ids, requestId: 'score-2' });
      checkScores(plain, await reference(ids, {}), 0, true);
      expect(plain.positions.every((p) => p.candidateLogprob === 0 && p.topIds.length === 0)).toBe(true);
      expect(fake.requests).toHaveLength(2);
      expect(fake.requests[1]).toMatchObject({ top_logprobs_num: 0 });
      expect(fake.requests[1]).not.toHaveProperty('token_ids_logprob');
    });
  });

  test('a build without token_ids_logprob: candidates from the top-k, a bound outside it, exact only if none was bounded', async () => {
    const fake = sglang({ noTokenIdsLogprob: true });
    await withShim(fake, {}, async (score) => {
      const reply = await score({ ids, candidateIds: candidates, topK: TOP_K, requestId: 'old-1' });
      const { bounded } = checkScores(reply, await reference(ids, { candidates, topK: TOP_K }), TOP_K, false);
      expect(bounded).toBeGreaterThan(0);
      expect(reply.exact).toBe(false);

      // top_k 0 with candidates: one alternative is asked for all the same, so the bound exists.
      const narrow = await score({ ids, candidateIds: candidates, topK: 0, requestId: 'old-2' });
      checkScores(narrow, await reference(ids, { candidates }), 0, false);
      expect(fake.requests[1]).toMatchObject({ top_logprobs_num: 1 });

      // Candidates that are all the next id or the top-1 are never bounded: exact.
      const easy = wide.map((p, i) => (i % 2 ? ids[i + 1]! : p.topIds[0]!));
      const exact = await score({ ids, candidateIds: easy, topK: 2, requestId: 'old-3' });
      expect(exact.exact).toBe(true);
      const want = await reference(ids, { candidates: easy, topK: 2 });
      exact.positions.forEach((p, i) => expectClose(p.candidateLogprob, want[i]!.candidateLogprob, `easy candidate at ${i}`));
      expect(fake.requests).toHaveLength(3);
    });
  });

  test('vocab_limit leaves ids at or above it out of the top-k', async () => {
    await withShim(sglang(), {}, async (score) => {
      const reply = await score({ ids, topK: TOP_K, vocabLimit: 100, requestId: 'limit' });
      expect(reply.positions.every((p) => p.topIds.every((id) => id < 100))).toBe(true);
    });
  });

  test('a server without prompt log-probabilities: UNIMPLEMENTED with the reason', async () => {
    const fake = sglang({ noPromptLogprobs: true });
    await withShim(fake, {}, async (score) => {
      const error = await score({ ids, topK: 1, requestId: 'none' }).catch((e: grpc.ServiceError) => e);
      expect((error as grpc.ServiceError).code).toBe(grpc.status.UNIMPLEMENTED);
      expect((error as grpc.ServiceError).details).toContain('the SGLang server returned no prompt log-probabilities');
      expect(fake.requests).toHaveLength(1);
    });
  });

  test('a sequence longer than the window: OUT_OF_RANGE from the shim, nothing sent to the server', async () => {
    const fake = sglang();
    await withShim(fake, {}, async (score) => {
      // As long as the context: the server would refuse it, so the shim does first.
      const long = Array.from({ length: model.pack.maxPositions }, (_, i) => (i === 0 ? 1 : 300 + (i % 50)));
      const error = await score({ ids: long, requestId: 'long' }).catch((e: grpc.ServiceError) => e);
      expect((error as grpc.ServiceError).code).toBe(grpc.status.OUT_OF_RANGE);
      expect((error as grpc.ServiceError).details).toContain(`window of ${model.pack.maxPositions - 1}`);
      expect(fake.requests).toHaveLength(0);
    });
  });
});

describe('Score through the openai backend', () => {
  test('vLLM prompt_logprobs: the top-k exact, candidates outside it bounded; one completion per call', async () => {
    const fake = openai({ errors: 'vllm' });
    await withShim(fake, {}, async (score) => {
      const reply = await score({ ids, candidateIds: candidates, topK: TOP_K, requestId: 'v-1' });
      const { bounded } = checkScores(reply, await reference(ids, { candidates, topK: TOP_K }), TOP_K, false);
      expect(bounded).toBeGreaterThan(0);
      expect(fake.requests).toEqual([
        {
          model: 'stories260k',
          prompt: ids,
          max_tokens: 0,
          temperature: 0,
          prompt_logprobs: TOP_K,
          echo: true,
          logprobs: TOP_K,
          return_tokens_as_token_ids: true,
        },
      ]);
    });
  });

  test('an echoed prompt where prompt_logprobs is ignored: token_id keys, the same figures', async () => {
    for (const options of [{ extraTopEntry: true }, { extraTopEntry: false }]) {
      const fake = openai({ noPromptLogprobs: true, ...options });
      await withShim(fake, {}, async (score) => {
        const reply = await score({ ids, candidateIds: candidates, topK: TOP_K, requestId: 'echo-1' });
        checkScores(reply, await reference(ids, { candidates, topK: TOP_K }), TOP_K, false);
        const narrow = await score({ ids, candidateIds: candidates, topK: 0, requestId: 'echo-2' });
        checkScores(narrow, await reference(ids, { candidates }), 0, false);
        expect(fake.requests).toHaveLength(2);
      });
    }
  });

  test('text keys: bounded without the tokenizer, named by it where one id has the text', async () => {
    const textOnly: FakeOpenAiOptions = { noPromptLogprobs: true, noTokenIdsAsTokens: true };
    // Without a tokenizer to map the text keys, a top-k cannot be named: a clear refusal.
    await withShim(openai(textOnly), {}, async (score) => {
      const error = await score({ ids, topK: TOP_K, requestId: 't-1' }).catch((e: grpc.ServiceError) => e);
      expect((error as grpc.ServiceError).code).toBe(grpc.status.FAILED_PRECONDITION);
      expect((error as grpc.ServiceError).details).toContain('by text only');
      // Candidates need no names: the actual next id is read off the echo, the rest bounded.
      const reply = await score({ ids, candidateIds: candidates, topK: 0, requestId: 't-2' });
      const want = await reference(ids, { candidates });
      reply.positions.forEach((p, i) => {
        expectClose(p.nextLogprob, want[i]!.nextLogprob, `next at ${i}`);
        if (candidates[i] === ids[i + 1]) expectClose(p.candidateLogprob, want[i]!.candidateLogprob, `candidate at ${i}`);
        else expect(p.candidateLogprob).toBeGreaterThanOrEqual(want[i]!.candidateLogprob - SCORE_TOLERANCE);
      });
    });
    // With the shim's tokenizer, a text only one id decodes to names it. stories260K's single-token texts
    // lose their word-initial space, so some are shared (`a` is ' a', 'a' and the byte <0x61>): the top-1
    // texts of the first 11 positions are all unshared, position 20's is not.
    await withShim(openai(textOnly), { openaiRetokenize: true }, async (score) => {
      const prefix = ids.slice(0, 12);
      const named = await score({ ids: prefix, candidateIds: candidates.slice(0, 11), topK: 1, requestId: 't-3' });
      checkScores(named, await reference(prefix, { candidates: candidates.slice(0, 11), topK: 1 }), 1, false);
      const error = await score({ ids, topK: 1, requestId: 't-4' }).catch((e: grpc.ServiceError) => e);
      expect((error as grpc.ServiceError).code).toBe(grpc.status.FAILED_PRECONDITION);
      expect((error as grpc.ServiceError).details).toContain('at position 20 by text only');
      expect((error as grpc.ServiceError).details).toContain('several ids share the text');
    });
  });

  test('a server with neither prompt_logprobs nor echo: UNIMPLEMENTED naming both', async () => {
    const fake = openai({ noPromptLogprobs: true, noEcho: true });
    await withShim(fake, {}, async (score) => {
      const error = await score({ ids, topK: 1, requestId: 'n' }).catch((e: grpc.ServiceError) => e);
      expect((error as grpc.ServiceError).code).toBe(grpc.status.UNIMPLEMENTED);
      expect((error as grpc.ServiceError).details).toContain('prompt_logprobs');
      expect((error as grpc.ServiceError).details).toContain('echo');
      expect(fake.requests).toHaveLength(1);
    });
  });
});
