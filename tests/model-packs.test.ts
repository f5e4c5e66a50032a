import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { DEMO, TRUNCATED_DEMO } from '../src/shared/paths.ts';
import { ensureDemoPacks, tinyStoriesParagraphs } from './helpers/demo-packs.ts';
import { Llama2cReference } from './helpers/llama2c-reference-model.ts';
import { maxAbsDiff } from './helpers/max-abs-diff.ts';
import { argmax } from '../src/shared/model/logits.ts';

const MANIFEST_TEXT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high';
/**
 * The demo edge model (the distilled 1-layer student) alone, greedy from <s>: computed by this file's
 * independent reference forward pass (tests/helpers/llama2c-reference-model.ts) over
 * stories260K-distilled-1l.bin. Fluent, unlike the truncated 3-layer copy.
 */
const DISTILLED_TEXT =
  'Once upon a time, there was a little girl named Lily. She loved to play with her toys and play with her toys. One day, she saw a big box. She wanted to play with her toys and showed it';

/** The three packs checked here: the cloud model, the truncated 3-layer edge model, the distilled 1-layer one. */
type PackName = 'cloud' | 'truncated-3l' | 'distilled-1l';
const CHECKPOINTS: Record<PackName, { checkpoint: string; layers?: number; dir: string }> = {
  cloud: { checkpoint: DEMO.checkpoint, dir: DEMO.cloudPack },
  'truncated-3l': { checkpoint: TRUNCATED_DEMO.edgeCheckpoint, layers: 3, dir: TRUNCATED_DEMO.edgePack },
  'distilled-1l': { checkpoint: DEMO.edgeCheckpoint, dir: DEMO.edgePack },
};
/**
 * Perplexity on the MANIFEST's protocol (first 40 paragraphs, 4,062 predicted tokens): the MANIFEST's figures
 * for the 5-layer model and its truncated copy; the distilled student's (not in the MANIFEST) from this
 * file's reference forward pass over the same protocol.
 */
const PERPLEXITY: Record<PackName, number> = { cloud: 4.544, 'truncated-3l': 47.51, 'distilled-1l': 8.245 };

function logSoftmaxAt(logits: Float32Array, index: number): number {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  return logits[index]! - max - Math.log(sum);
}

const packs = {} as Record<PackName, DecoderModel>;
let tokenizer: TextTokenizer;
let text64: number[];

beforeAll(async () => {
  await ensureDemoPacks();
  for (const [name, { dir }] of Object.entries(CHECKPOINTS)) packs[name as PackName] = await DecoderModel.load(loadModelPack(dir));
  tokenizer = await TextTokenizer.fromPack(DEMO.cloudPack);
  const [first] = await tinyStoriesParagraphs(1);
  text64 = tokenizer.encode(first!, { addBos: true }).slice(0, 64);
});

afterAll(async () => {
  for (const model of Object.values(packs)) await model.release();
});

describe('stories260K packs against a llama2.c reference forward pass', () => {
  for (const name of Object.keys(CHECKPOINTS) as PackName[]) {
    test(`${name}: logits within 1e-4 at every position of a 64-token text, hidden_states = final norm`, async () => {
      expect(text64.length).toBe(64);
      const reference = new Llama2cReference(CHECKPOINTS[name].checkpoint, CHECKPOINTS[name].layers);
      const seq = packs[name].newSequence();
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
    const model = packs.cloud;
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

async function greedyFromBos(model: DecoderModel, count: number): Promise<string> {
  const seq = model.newSequence();
  const ids: number[] = [];
  let { logits } = await seq.append([1]);
  for (let i = 0; i < count; i++) {
    const next = argmax(logits);
    ids.push(next);
    ({ logits } = await seq.append([next]));
  }
  seq.dispose();
  return tokenizer.decode(ids);
}

test('greedy decoding of 60 tokens from <s> gives the MANIFEST text', async () => {
  expect(await greedyFromBos(packs.cloud, 60)).toBe(MANIFEST_TEXT);
});

test("the demo edge pack (distilled 1-layer) alone writes the reference forward pass's fluent text", async () => {
  expect(await greedyFromBos(packs['distilled-1l'], 60)).toBe(DISTILLED_TEXT);
});

describe('perplexity on the first 40 TinyStories paragraphs', () => {
  for (const name of Object.keys(CHECKPOINTS) as PackName[]) {
    test(`${name} lands within 2% of ${PERPLEXITY[name]}`, async () => {
      const paragraphs = await tinyStoriesParagraphs(40);
      let nll = 0;
      let predicted = 0;
      for (const paragraph of paragraphs) {
        const ids = tokenizer.encode(paragraph, { addBos: true });
        const seq = packs[name].newSequence();
        const { allLogits } = await seq.append(ids, { allPositions: true });
        seq.dispose();
        const vocab = packs[name].pack.vocabSize;
        for (let pos = 0; pos + 1 < ids.length; pos++) {
          nll -= logSoftmaxAt(allLogits!.subarray(pos * vocab, (pos + 1) * vocab), ids[pos + 1]!);
          predicted++;
        }
      }
      expect(predicted).toBe(4062);
      const perplexity = Math.exp(nll / predicted);
      expect(Math.abs(perplexity / PERPLEXITY[name] - 1)).toBeLessThan(0.02);
    });
  }
});
