/**
 * The router network: standardize → Linear(in, H) → ReLU → Linear(H, 1) → sigmoid, in plain
 * TypeScript. The score is capped just below 1 (the largest float32 under 1) so that a threshold of
 * exactly 1 routes every token; the ONNX export applies the same cap.
 *
 * @example
 * const scores = predict(weights, hiddenRows, rows);
 */
import { seededRandom } from '../../shared/seeded-random.ts';

/** The largest float32 below 1: the highest score a router can return. */
export const MAX_SCORE = 1 - 2 ** -24;

export interface MlpWeights {
  inputSize: number;
  hiddenUnits: number;
  /** Feature standardization: x' = (x - mean) / std. */
  mean: Float32Array;
  std: Float32Array;
  /** `[inputSize, hiddenUnits]` row-major (the layout of ONNX Gemm's B). */
  w1: Float32Array;
  b1: Float32Array;
  w2: Float32Array;
  b2: number;
}

export function sigmoid(z: number): number {
  return z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z));
}

export function cloneWeights(w: MlpWeights): MlpWeights {
  return { ...w, mean: w.mean.slice(), std: w.std.slice(), w1: w.w1.slice(), b1: w.b1.slice(), w2: w.w2.slice() };
}

/**
 * Pre-activations of the hidden layer for one already-standardized row: `out[j] = b1[j] + Σ x[i]·w1[i,j]`.
 * Shared by prediction and training so both compute exactly the same numbers.
 */
export function hiddenLayer(w: MlpWeights, x: Float32Array, out: Float64Array): void {
  const { inputSize, hiddenUnits: h, w1, b1 } = w;
  for (let j = 0; j < h; j++) out[j] = b1[j]!;
  for (let i = 0; i < inputSize; i++) {
    const xi = x[i]!;
    if (xi === 0) continue;
    const row = i * h;
    for (let j = 0; j < h; j++) out[j] += xi * w1[row + j]!;
  }
}

/** The output logit from hidden pre-activations (ReLU applied here). */
export function outputLogit(w: MlpWeights, z1: Float64Array): number {
  let z = w.b2;
  for (let j = 0; j < w.hiddenUnits; j++) if (z1[j]! > 0) z += z1[j]! * w.w2[j]!;
  return z;
}

/** Standardizes `rows` rows of raw features (row-major) into a new array. */
export function standardize(w: Pick<MlpWeights, 'inputSize' | 'mean' | 'std'>, features: Float32Array, rows: number): Float32Array {
  const n = w.inputSize;
  const out = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < n; i++) out[r * n + i] = (features[r * n + i]! - w.mean[i]!) / w.std[i]!;
  }
  return out;
}

/** Scores of already-standardized rows. */
export function predictStandardized(w: MlpWeights, x: Float32Array, rows: number): Float32Array {
  const z1 = new Float64Array(w.hiddenUnits);
  const out = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    hiddenLayer(w, x.subarray(r * w.inputSize, (r + 1) * w.inputSize), z1);
    out[r] = Math.min(sigmoid(outputLogit(w, z1)), MAX_SCORE);
  }
  return out;
}

/** Scores of raw feature rows (`[rows, inputSize]`, row-major). */
export function predict(w: MlpWeights, features: Float32Array, rows: number): Float32Array {
  return predictStandardized(w, standardize(w, features, rows), rows);
}

/**
 * The first layer with the standardization folded in, for export: W1'[i,j] = W1[i,j] / std[i] and
 * b1'[j] = b1[j] - Σ_i mean[i] / std[i] · W1[i,j], so that raw features give the same pre-activations.
 */
export function foldStandardization(w: MlpWeights): { w1: Float32Array; b1: Float32Array } {
  const { inputSize, hiddenUnits: h } = w;
  const w1 = new Float32Array(inputSize * h);
  const b1 = new Float64Array(w.b1);
  for (let i = 0; i < inputSize; i++) {
    const scale = 1 / w.std[i]!;
    const shift = w.mean[i]! * scale;
    for (let j = 0; j < h; j++) {
      const v = w.w1[i * h + j]!;
      w1[i * h + j] = v * scale;
      b1[j] -= shift * v;
    }
  }
  return { w1, b1: Float32Array.from(b1) };
}

/** A standard normal sampler on top of a seeded uniform generator (Box–Muller). */
export function normalSampler(random: () => number): () => number {
  return () => {
    const u = 1 - random(); // (0, 1]: log stays finite
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  };
}

/**
 * Fresh weights: He-normal first layer, Xavier-normal second, output bias at the logit of `prior`
 * (the share of label 1), identity standardization.
 */
export function initialWeights(inputSize: number, hiddenUnits: number, seed: number, prior = 0.5): MlpWeights {
  const normal = normalSampler(seededRandom(seed));
  const w1 = Float32Array.from({ length: inputSize * hiddenUnits }, () => normal() * Math.sqrt(2 / inputSize));
  const w2 = Float32Array.from({ length: hiddenUnits }, () => normal() * Math.sqrt(1 / hiddenUnits));
  const p = Math.min(0.99, Math.max(0.01, prior));
  return {
    inputSize,
    hiddenUnits,
    mean: new Float32Array(inputSize),
    std: new Float32Array(inputSize).fill(1),
    w1,
    b1: new Float32Array(hiddenUnits),
    w2,
    b2: Math.log(p / (1 - p)),
  };
}
