import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/decoder-model.ts';
import { loadModelPack } from '../src/shared/model-pack.ts';
import { TextTokenizer } from '../src/shared/tokenizer.ts';
import { DEMO } from '../src/shared/paths.ts';
import { ensureDemoPacks, tinyStoriesParagraphs } from './helpers/demo-packs.ts';
import { Llama2cReference } from './helpers/llama2c-reference-model.ts';

const MANIFEST_TEXT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high';
const MANIFEST_PERPLEXITY: Record<number, number> = { 5: 4.544, 3: 47.51 };

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

function logSoftmaxAt(logits: Float32Array, index: number): number {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  return logits[index]! - max - Math.log(sum);
}

const packs: Record<number, DecoderModel> = {};
let tokenizer: TextTokenizer;
let text64: number[];

beforeAll(async () => {
  await ensureDemoPacks();
  packs[5] = await DecoderModel.load(loadModelPack(DEMO.cloudPack));
  packs[3] = await DecoderModel.load(loadModelPack(DEMO.edgePack));
  tokenizer = await TextTokenizer.fromPack(DEMO.cloudPack);
  const [first] = await tinyStoriesParagraphs(1);
  text64 = tokenizer.encode(first!, { addBos: true }).slice(0, 64);
});

afterAll(async () => {
  for (const model of Object.values(packs)) await model.release();
});

describe('stories260K packs against a llama2.c reference forward pass', () => {
  for (const layers of [5, 3]) {
    test(`K=${layers}: logits within 1e-4 at every position of a 64-token text, hidden_states = final norm`, async () => {
      expect(text64.length).toBe(64);
      const reference = new Llama2cReference(DEMO.checkpoint, layers);
      const seq = packs[layers]!.newSequence();
      const { allLogits, allHidden } = await seq.append(text64, { allPositions: true });
      seq.dispose();
      const vocab = reference.vocabSize;
      const dim = reference.dim;
      let worstLogit = 0;
      let worstHidden = 0;
      text64.forEach((token, pos) => {
        const expected = reference.step(token);
        worstLogit = Math.max(worstLogit, maxAbsDiff(allLogits!.subarray(pos * vocab, (pos + 1) * vocab), expected.logits));
        worstHidden = Math.max(worstHidden, maxAbsDiff(allHidden!.subarray(pos * dim, (pos + 1) * dim), expected.hidden));
      });
      expect(worstLogit).toBeLessThan(1e-4);
      expect(worstHidden).toBeLessThan(1e-4);
    });
  }

  test('incremental decoding with the KV cache matches a full prefill', async () => {
    const model = packs[5]!;
    const full = model.newSequence();
    const { allLogits } = await full.append(text64, { allPositions: true });
    full.dispose();
    const incremental = model.newSequence();
    const vocab = model.pack.vocabSize;
    // A prefill of 10 tokens, a 3-token append, then single steps.
    await incremental.append(text64.slice(0, 10));
    const three = await incremental.append(text64.slice(10, 13));
    expect(maxAbsDiff(three.logits, allLogits!.subarray(12 * vocab, 13 * vocab))).toBeLessThan(1e-4);
    for (let pos = 13; pos < 64; pos++) {
      const { logits } = await incremental.append([text64[pos]!]);
      expect(maxAbsDiff(logits, allLogits!.subarray(pos * vocab, (pos + 1) * vocab))).toBeLessThan(1e-4);
    }
    expect(incremental.length).toBe(64);
    incremental.dispose();
  });
});

test('greedy decoding of 60 tokens from <s> gives the MANIFEST text', async () => {
  const seq = packs[5]!.newSequence();
  const ids: number[] = [];
  let { logits } = await seq.append([1]);
  for (let i = 0; i < 60; i++) {
    const next = argmax(logits);
    ids.push(next);
    ({ logits } = await seq.append([next]));
  }
  seq.dispose();
  expect(tokenizer.decode(ids)).toBe(MANIFEST_TEXT);
});

describe('perplexity on the first 40 TinyStories paragraphs', () => {
  for (const layers of [5, 3]) {
    test(`K=${layers} lands within 2% of the MANIFEST figure`, async () => {
      const paragraphs = await tinyStoriesParagraphs(40);
      let nll = 0;
      let predicted = 0;
      for (const paragraph of paragraphs) {
        const ids = tokenizer.encode(paragraph, { addBos: true });
        const seq = packs[layers]!.newSequence();
        const { allLogits } = await seq.append(ids, { allPositions: true });
        seq.dispose();
        const vocab = packs[layers]!.pack.vocabSize;
        for (let pos = 0; pos + 1 < ids.length; pos++) {
          nll -= logSoftmaxAt(allLogits!.subarray(pos * vocab, (pos + 1) * vocab), ids[pos + 1]!);
          predicted++;
        }
      }
      expect(predicted).toBe(4062);
      const perplexity = Math.exp(nll / predicted);
      expect(Math.abs(perplexity / MANIFEST_PERPLEXITY[layers]! - 1)).toBeLessThan(0.02);
    });
  }
});
