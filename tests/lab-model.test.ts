/**
 * The lab's thread choice (lab-model.ts): one intra-op thread for a model whose forward pass is too small to
 * split, onnxruntime's default for one that is not, decided from the pack's config alone.
 */
import { expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { labThreads, loadLabModel, multiplyAddsPerToken, ONE_THREAD_BELOW_MULTIPLY_ADDS } from '../src/tools/lab/lab-model.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

test('the count is 12·h² per layer and h·vocabulary for the logits', () => {
  expect(multiplyAddsPerToken({ numLayers: 5, hiddenSize: 64, vocabSize: 512 })).toBe(5 * 12 * 64 * 64 + 64 * 512);
  // Qwen2.5-0.5B's shape: far over the bound, onnxruntime's threads.
  expect(multiplyAddsPerToken({ numLayers: 24, hiddenSize: 896, vocabSize: 151_936 })).toBe(24 * 12 * 896 * 896 + 896 * 151_936);
});

test('a stories260K-sized pass runs on one thread, a 64-wide model with a 151,936-token vocabulary on the default', () => {
  expect(labThreads({ numLayers: 5, hiddenSize: 64, vocabSize: 512 })).toBe(1);
  expect(labThreads({ numLayers: 2, hiddenSize: 64, vocabSize: 151_936 })).toBeUndefined();
  expect(labThreads({ numLayers: 24, hiddenSize: 896, vocabSize: 151_936 })).toBeUndefined();
});

test('the bound is where the rule turns: one multiply-add under it is one thread, at it the default', () => {
  // hiddenSize 1 and no layers: the count is the vocabulary.
  expect(labThreads({ numLayers: 0, hiddenSize: 1, vocabSize: ONE_THREAD_BELOW_MULTIPLY_ADDS - 1 })).toBe(1);
  expect(labThreads({ numLayers: 0, hiddenSize: 1, vocabSize: ONE_THREAD_BELOW_MULTIPLY_ADDS })).toBeUndefined();
});

test('the demo pair loads on one thread and gives the logits the default threads give', async () => {
  const demo = await ensureDemoPacks();
  const pack = loadModelPack(demo.edgePack);
  expect(labThreads(pack)).toBe(1);
  const logitsOf = async (model: DecoderModel) => {
    try {
      const sequence = model.newSequence();
      const { logits } = await sequence.append([1, 100, 200, 300]);
      sequence.dispose();
      return Array.from(logits);
    } finally {
      await model.release();
    }
  };
  const one = await logitsOf(await loadLabModel(pack));
  const reference = await logitsOf(await DecoderModel.load(pack));
  expect(one.length).toBe(pack.vocabSize);
  // Summed in another order on more threads: equal to float32 rounding.
  one.forEach((x, i) => expect(x).toBeCloseTo(reference[i]!, 4));
});
