/**
 * The context-delta protocol without any gRPC: what each step puts in its message (the context once, then
 * deltas; sampling only when it changed), how the edge's copy of the shim's context follows the replies,
 * the conditional-step overlap rule, and the wire mapping.
 */
import { describe, expect, test } from 'bun:test';
import { checkSources, ShimContextCopy, stepMessage, toReply, wireSampling } from '../src/edge/cloud/context-delta.ts';
import type { StepResult__Output } from '../src/shared/grpc/proto.ts';
import { EdgeContext } from './helpers/cloud-fixture.ts';

/** A step result as the wire delivers it (defaults filled in). */
function result(ids: number[], contextLength: number, extra: Partial<StepResult__Output> = {}): StepResult__Output {
  return {
    ids,
    text: '',
    logprobs: ids.map(() => -0.5),
    top: [],
    cachedTokens: 0,
    backendMs: 1,
    shimMs: 0.5,
    finishReason: 'FINISH_REASON_UNSPECIFIED',
    contextLength,
    skipped: false,
    load: null,
    overloaded: false,
    ...extra,
  };
}

const SAMPLING = { temperature: 0, topP: 1, stopTokenIds: [2], topLogprobs: 0 };
const RECORDS = { tokenIndex: 2, maxTokens: 1, routerScore: 0.25, threshold: 0.5 };

describe('a plain stream', () => {
  test('opens with the whole context and an empty step, then sends only what the shim lacks', () => {
    const edge = new EdgeContext([1, 403, 407]);
    const shim = new ShimContextCopy();
    expect(shim.open(edge.step(), 'r1', 10_000)).toEqual([
      {
        open: {
          requestId: 'r1',
          sampling: SAMPLING,
          contextIds: [1, 403, 407],
          contextSources: ['TOKEN_SOURCE_PROMPT', 'TOKEN_SOURCE_PROMPT', 'TOKEN_SOURCE_PROMPT'],
          stepTimeoutMs: 10_000,
        },
      },
      { step: { offset: 3, ids: [], sources: [], ...RECORDS } },
    ]);
    expect(shim.length).toBe(3);
    // The shim returned 261 and holds 4 tokens: the copy agrees.
    expect(shim.answered(result([261], 4))).toBe(true);
    edge.push([261], 'llm');
    edge.push([300, 301], 'slm');
    expect(shim.matches(edge.ids)).toBe(true);
    expect(shim.step(edge.step({ tokenIndex: 5 }))).toEqual({
      step: { offset: 4, ids: [300, 301], sources: ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_SLM'], ...RECORDS, tokenIndex: 5 },
    });
    expect(shim.length).toBe(6);
  });

  test('open carries the routing key when the generation has one, and only then', () => {
    const edge = new EdgeContext([1, 403]);
    const [keyed] = new ShimContextCopy().open(edge.step(), 'r1', 1_000, 'chat-42');
    expect(keyed!.open).toMatchObject({ requestId: 'r1', routingKey: 'chat-42' });
    const [plain] = new ShimContextCopy().open(edge.step(), 'r1', 1_000);
    expect(Object.keys(plain!.open!)).not.toContain('routingKey');
  });

  test('sampling goes out again only when it changed, and then once', () => {
    const edge = new EdgeContext([1, 403]);
    const shim = new ShimContextCopy();
    shim.open(edge.step(), 'r1', 1_000);
    expect(shim.step(edge.step()).step!.sampling).toBeUndefined();
    const warmer = shim.step(edge.step({ temperature: 0.8, seed: 7 })).step!;
    expect(warmer.sampling).toEqual({ ...SAMPLING, temperature: 0.8, seed: 7 });
    expect(shim.step(edge.step({ temperature: 0.8, seed: 7 })).step!.sampling).toBeUndefined();
  });

  test('a reply whose context length disagrees with the copy says the stream must go', () => {
    const edge = new EdgeContext([1, 403]);
    const shim = new ShimContextCopy();
    shim.open(edge.step(), 'r1', 1_000);
    expect(shim.answered(result([261, 262], 3))).toBe(false);
  });

  test('what the shim returned is checked against the edge context: a diverged or shorter context does not match', () => {
    const shim = new ShimContextCopy();
    shim.open(new EdgeContext([1, 403, 407]).step(), 'r1', 1_000);
    shim.answered(result([261], 4));
    expect(shim.matches([1, 403])).toBe(false);
    // The edge kept its own token at position 3 (the shim's reply came too late): the shim's copy is not the edge's.
    expect(shim.matches([1, 403, 407, 262, 9])).toBe(false);
    expect(shim.matches([1, 403, 407, 261, 9])).toBe(true);
    shim.reset();
    expect(shim.length).toBe(0);
    expect(shim.matches([5])).toBe(true);
  });
});

describe('a conditional step', () => {
  test('starts where the reply in flight goes, with the guess; its ids join the copy once answered', () => {
    const edge = new EdgeContext([1, 403]);
    const shim = new ShimContextCopy();
    shim.open(edge.step(), 'r1', 1_000);
    // The edge guesses 261 for the step in flight and routes the position after it.
    edge.push([261], 'slm');
    expect(shim.conditionalStep(edge.step({ tokenIndex: 3 }))).toEqual({
      step: { offset: 2, ids: [261], sources: ['TOKEN_SOURCE_SLM'], ...RECORDS, tokenIndex: 3, conditional: true },
    });
    expect(shim.length).toBe(2);
    // The step in flight returned 261, as guessed; the conditional one returned 300.
    expect(shim.answered(result([261], 3))).toBe(true);
    expect(shim.answeredConditional(edge.step(), result([300], 4))).toBe(true);
    expect(shim.length).toBe(4);
    expect(shim.matches([1, 403, 261, 300])).toBe(true);
  });

  test('must extend what was sent by the token it assumes', () => {
    const edge = new EdgeContext([1, 403]);
    const shim = new ShimContextCopy();
    shim.open(edge.step(), 'r1', 1_000);
    expect(() => shim.conditionalStep(edge.step())).toThrow(expect.objectContaining({ code: 'FAILED_PRECONDITION' }));
    expect(() => shim.conditionalStep({ ...edge.step(), context: [1, 404, 261], sources: ['prompt', 'prompt', 'slm'] })).toThrow(
      expect.objectContaining({ code: 'FAILED_PRECONDITION' }),
    );
  });
});

describe('the wire mapping', () => {
  test('the seed is a uint32, absent when unset; top_p 0 goes out as is (the shim reads it as 1)', () => {
    const edge = new EdgeContext();
    expect(wireSampling(edge.step({ seed: -1, topP: 0 }))).toEqual({ ...SAMPLING, topP: 0, seed: 4294967295 });
    expect('seed' in wireSampling(edge.step())).toBe(false);
  });

  test('the hidden state goes out only when the edge sends it', () => {
    const edge = new EdgeContext();
    expect(stepMessage(edge.step({ hiddenState: new Float32Array([0.5, -1]) }), 1, [], []).slmHiddenState).toEqual([0.5, -1]);
    expect('slmHiddenState' in stepMessage(edge.step(), 1, [], [])).toBe(false);
  });

  test('a step result becomes the loop reply; a missing alternative logprob is NaN', () => {
    const reply = toReply(
      result([261, 300], 9, {
        text: ' Tim',
        top: [
          { ids: [261, 5], logprobs: [-0.1] },
          { ids: [], logprobs: [] },
        ],
      }),
    );
    expect(reply).toEqual({
      tokens: [261, 300],
      text: ' Tim',
      logprobs: [-0.5, -0.5],
      topAlternatives: [
        [
          { id: 261, logprob: -0.1 },
          { id: 5, logprob: Number.NaN },
        ],
        [],
      ],
      cachedTokens: 0,
      backendMs: 1,
      shimMs: 0.5,
    });
  });

  test("an overloaded result is a reply without tokens that says so; the shim's load comes with any reply that carries it", () => {
    const load = { stepsInFlight: 8, stepsQueued: 3, backendMs: 41.5, maxInFlight: 8 };
    expect(toReply(result([], 9, { overloaded: true, load }))).toEqual({
      tokens: [],
      text: '',
      logprobs: [],
      topAlternatives: [],
      cachedTokens: 0,
      backendMs: 1,
      shimMs: 0.5,
      overloaded: true,
      load: { stepsInFlight: 8, stepsQueued: 3, backendMs: 41.5 },
    });
    expect(toReply(result([261], 9, { load })).load).toEqual({ stepsInFlight: 8, stepsQueued: 3, backendMs: 41.5 });
    expect('overloaded' in toReply(result([261], 9, { load }))).toBe(false);
    // A shim older than the field sends none.
    expect('load' in toReply(result([261], 9))).toBe(false);
  });

  test('every id needs its source', () => {
    expect(() => checkSources({ ...new EdgeContext([1, 403]).step(), sources: ['prompt'] })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'context has 2 ids but 1 sources' }),
    );
  });
});
