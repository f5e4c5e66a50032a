/**
 * Log-probabilities from the model that chose each token: the loop's figures against the models' own
 * teacher-forced scores of the finished sequence (position-scores.ts), for the edge's tokens, the cloud's
 * (through the shim's core, in process), and a constrained generation, whose alternatives the grammar allows.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { generate, type DoneEvent, type GenerationEvent, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { edgeLogprob } from '../src/edge/loop/token-logprobs.ts';
import { parseGenerationRequest, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { AppError } from '../src/shared/errors.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { scoreOnModel } from '../src/shared/model/position-scores.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';

const PROMPT = 'Once upon a time, there was a little dog';
let pair: DemoPairModels;
beforeAll(async () => (pair = await loadDemoPairModels({ record: false })));
afterAll(() => pair.release());

async function run(raw: RawGenerationRequest): Promise<{ tokens: TokenEvent[]; done: DoneEvent; promptIds: number[] }> {
  const { edge, tokenizer, cloud } = pair;
  const events: GenerationEvent[] = [];
  for await (const e of generate({ edgeModel: edge, router: new TopProbabilityScorer(), tokenizer, cloud }, parseGenerationRequest({ prompt: PROMPT, ...raw })))
    events.push(e);
  return {
    tokens: events.filter((e): e is TokenEvent => e.type === 'token'),
    done: events.at(-1) as DoneEvent,
    promptIds: tokenizer.encode(PROMPT, { addBos: true }),
  };
}

/**
 * Each token's figures against `model`'s own scores of the whole sequence at that position. The two come from
 * different onnxruntime shapes (one row a step, teacher forcing's chunks), whose kernels differ in the last bits
 * from one CPU to another: figures agree to 1e-3.
 */
async function expectFiguresOf(model: DecoderModel, promptIds: number[], tokens: readonly TokenEvent[], which: (t: TokenEvent) => boolean, topN: number) {
  const ids = [...promptIds, ...tokens.map((t) => t.id)];
  const scores = await scoreOnModel(model, ids, { topK: topN });
  let checked = 0;
  for (const [i, token] of tokens.entries()) {
    if (!which(token)) continue;
    const at = scores[promptIds.length - 1 + i]!;
    expect(token.logprob!).toBeCloseTo(at.nextLogprob, 3);
    expect(token.topLogprobs!.map((a) => a.id)).toEqual(at.topIds);
    token.topLogprobs!.forEach((a, k) => expect(a.logprob).toBeCloseTo(at.topLogprobs[k]!, 3));
    checked++;
  }
  return checked;
}

describe('log-probabilities of the emitted tokens', () => {
  test('small_only: the edge model’s own figures, its greedy token first among the alternatives', async () => {
    const { tokens, promptIds } = await run({ mode: 'small_only', maxNewTokens: 12, logprobs: 3 });
    expect(tokens.length).toBe(12);
    expect(await expectFiguresOf(pair.edge, promptIds, tokens, () => true, 3)).toBe(12);
    for (const t of tokens) {
      expect(t.topLogprobs![0]!.id).toBe(t.id);
      expect(t.logprob!).toBeLessThanOrEqual(0);
    }
  });

  test('llm_only: the cloud model’s figures, carried back by the shim’s reply', async () => {
    const { tokens, promptIds } = await run({ mode: 'llm_only', maxNewTokens: 8, logprobs: 2 });
    expect(tokens.every((t) => t.source === 'llm')).toBe(true);
    expect(await expectFiguresOf(pair.cloudModel, promptIds, tokens, () => true, 2)).toBe(8);
  });

  test('joint: each token carries the figures of the model that chose it', async () => {
    const { tokens, promptIds } = await run({ mode: 'joint', threshold: 0.6, maxNewTokens: 24, logprobs: 4 });
    const routed = tokens.filter((t) => t.source === 'llm').length;
    expect(routed).toBeGreaterThan(0);
    expect(routed).toBeLessThan(tokens.length);
    expect(await expectFiguresOf(pair.cloudModel, promptIds, tokens, (t) => t.source === 'llm', 4)).toBe(routed);
    expect(await expectFiguresOf(pair.edge, promptIds, tokens, (t) => t.source === 'slm', 4)).toBe(tokens.length - routed);
  });

  test('asked for no alternatives: the token’s own figure and an empty list', async () => {
    const { tokens, promptIds } = await run({ mode: 'small_only', maxNewTokens: 4, logprobs: 0 });
    const scores = await scoreOnModel(pair.edge, [...promptIds, ...tokens.map((t) => t.id)]);
    tokens.forEach((t, i) => {
      expect(t.topLogprobs).toEqual([]);
      expect(t.logprob!).toBeCloseTo(scores[promptIds.length - 1 + i]!.nextLogprob, 3);
    });
  });

  test('not asked: no figures on the events', async () => {
    const { tokens } = await run({ mode: 'joint', threshold: 0.6, maxNewTokens: 6 });
    for (const t of tokens) expect('logprob' in t || 'topLogprobs' in t).toBe(false);
  });

  test('a constraint leaves out the alternatives it forbids, from either model', async () => {
    const { tokenizer } = pair;
    for (const mode of ['small_only', 'llm_only', 'joint'] as const) {
      const { tokens, done } = await run({ mode, threshold: 0.6, maxNewTokens: 6, logprobs: 8, constraint: { regex: '[0-9]{2,6}' } });
      expect(done.text).toMatch(/^[0-9]{2,6}$/);
      for (const t of tokens) {
        expect(t.topLogprobs!.length).toBeGreaterThan(0);
        // Every alternative writes digits only (or ends the output where the grammar may end).
        for (const a of t.topLogprobs!) expect(tokenizer.eosIds.includes(a.id) || /^[0-9]+$/.test(tokenizer.decode([a.id]))).toBe(true);
        expect(t.topLogprobs!.map((a) => a.logprob)).toEqual([...t.topLogprobs!.map((a) => a.logprob)].sort((x, y) => y - x));
      }
    }
  });

  test('logprobs outside 0–20 or not a whole number is refused, naming the field', () => {
    for (const logprobs of [21, -1, 1.5, 'three', true]) {
      expect(() => parseGenerationRequest({ prompt: PROMPT, logprobs })).toThrow(AppError);
      expect(() => parseGenerationRequest({ prompt: PROMPT, logprobs })).toThrow(/^logprobs must be (an integer in \[0, 20\]|a number)/);
    }
    expect(parseGenerationRequest({ prompt: PROMPT, logprobs: 20 }).logprobs).toBe(20);
    expect('logprobs' in parseGenerationRequest({ prompt: PROMPT })).toBe(false);
  });
});

describe('edgeLogprob', () => {
  test('exact figures on a small vector: log-softmax, the top in order, forbidden and padded ids left out', () => {
    const logits = Float32Array.from([1, 3, 2, 0, 5]);
    const logZ = Math.log([1, 3, 2, 0, 5].reduce((s, x) => s + Math.exp(x), 0));
    // Id 4 is a padding row past the tokenizer's 4 ids: in the normalisation, never an alternative.
    const figures = edgeLogprob(logits, 2, 3, 4, (id) => id !== 1);
    expect(figures.logprob!).toBeCloseTo(2 - logZ, 6);
    expect(figures.top.map((t) => t.id)).toEqual([2, 0, 3]);
    figures.top.forEach((t) => expect(t.logprob).toBeCloseTo(logits[t.id]! - logZ, 6));
  });
});
