/**
 * The router network: standardize → Linear(in, H) → ReLU → Linear(H, 1) → sigmoid, in plain
 * TypeScript. The score is capped just below 1 (the largest float32 under 1) so that a threshold of
 * exactly 1 routes every token; the ONNX export applies the same cap.
 *
 * @example
 * const scores = predict(weights, hiddenRows, rows);
 */
import { seededRandom } from '../../shared/seeded-random.ts';
import { MAX_SCORE } from '../lab/max-score.ts';

export { MAX_SCORE };

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
  /** A learned vector per proposed token (the `token` feature group), added to the hidden layer's pre-activations. */
  tokens?: TokenVectors;
}

/**
 * The `token` group: the edge's proposed token (its top-1) selects a row that is added to the first
 * layer's pre-activations, which is what a one-hot input of the token would do, without a vocabulary-wide
 * input. Tokens seen too rarely in training share the last row.
 */
export interface TokenVectors {
  /** The edge's vocabulary size (its logits row): ids at or above it use the shared row. */
  vocabSize: number;
  /** Ids with a row of their own, ascending; row k belongs to ids[k]. */
  ids: Int32Array;
  /** `[ids.length + 1, hiddenUnits]` row-major; the last row is shared by every other id. */
  vectors: Float32Array;
}

/** The row of `tokens.vectors` that proposing `id` selects. */
export function tokenRow(tokens: TokenVectors, id: number): number {
  let lo = 0;
  let hi = tokens.ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = tokens.ids[mid]!;
    if (v === id) return mid;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return tokens.ids.length;
}

export function sigmoid(z: number): number {
  return z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z));
}

export function cloneWeights(w: MlpWeights): MlpWeights {
  const tokens = w.tokens && { ...w.tokens, ids: w.tokens.ids.slice(), vectors: w.tokens.vectors.slice() };
  return { ...w, mean: w.mean.slice(), std: w.std.slice(), w1: w.w1.slice(), b1: w.b1.slice(), w2: w.w2.slice(), ...(tokens ? { tokens } : {}) };
}

/**
 * Pre-activations of the hidden layer for one already-standardized row: `out[j] = b1[j] + Σ x[i]·w1[i,j]`
 * (+ the proposed token's vector, row `tokenRowIndex`, for routers with one).
 * Shared by prediction and training so both compute exactly the same numbers.
 */
export function hiddenLayer(w: MlpWeights, x: Float32Array, out: Float64Array, tokenRowIndex = -1): void {
  const { inputSize, hiddenUnits: h, w1, b1 } = w;
  for (let j = 0; j < h; j++) out[j] = b1[j]!;
  if (w.tokens && tokenRowIndex >= 0) {
    const base = tokenRowIndex * h;
    for (let j = 0; j < h; j++) out[j] += w.tokens.vectors[base + j]!;
  }
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

/** Scores of already-standardized rows; `proposed` holds each row's proposed token, for routers with token vectors. */
export function predictStandardized(w: MlpWeights, x: Float32Array, rows: number, proposed?: Int32Array): Float32Array {
  if (w.tokens && !proposed) throw new Error('internal: this router reads the proposed token; none was given');
  const z1 = new Float64Array(w.hiddenUnits);
  const out = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    hiddenLayer(w, x.subarray(r * w.inputSize, (r + 1) * w.inputSize), z1, w.tokens ? tokenRow(w.tokens, proposed![r]!) : -1);
    out[r] = Math.min(sigmoid(outputLogit(w, z1)), MAX_SCORE);
  }
  return out;
}

/** Scores of raw feature rows (`[rows, inputSize]`, row-major), and their proposed tokens for routers with token vectors. */
export function predict(w: MlpWeights, features: Float32Array, rows: number, proposed?: Int32Array): Float32Array {
  return predictStandardized(w, standardize(w, features, rows), rows, proposed);
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

/**
 * Several MLPs over the same standardized inputs as one: their hidden units side by side and the output
 * the mean of their logits. An ensemble of independently initialised members ranks positions better than
 * any one of them (docs/router-training.md), and this keeps it one MLP, one Gemm pair in router.onnx.
 */
export function mergeMembers(members: readonly MlpWeights[]): MlpWeights {
  const first = members[0];
  if (!first) throw new Error('internal: no members to merge');
  if (members.length === 1) return cloneWeights(first);
  const n = first.inputSize;
  const units = members.map((m) => m.hiddenUnits);
  const total = units.reduce((a, b) => a + b, 0);
  for (const m of members) {
    if (m.inputSize !== n || m.mean.some((v, i) => v !== first.mean[i]) || m.std.some((v, i) => v !== first.std[i])) {
      throw new Error('internal: ensemble members must share their inputs and standardization');
    }
    if (Boolean(m.tokens) !== Boolean(first.tokens) || (m.tokens && m.tokens.ids.some((v, i) => v !== first.tokens!.ids[i]))) {
      throw new Error('internal: ensemble members must share their token rows');
    }
  }
  const w1 = new Float32Array(n * total);
  const b1 = new Float32Array(total);
  const w2 = new Float32Array(total);
  const tokenRows = first.tokens ? first.tokens.ids.length + 1 : 0;
  const vectors = new Float32Array(tokenRows * total);
  let offset = 0;
  for (const m of members) {
    const h = m.hiddenUnits;
    for (let i = 0; i < n; i++) w1.set(m.w1.subarray(i * h, (i + 1) * h), i * total + offset);
    for (let r = 0; r < tokenRows; r++) vectors.set(m.tokens!.vectors.subarray(r * h, (r + 1) * h), r * total + offset);
    b1.set(m.b1, offset);
    for (let j = 0; j < h; j++) w2[offset + j] = m.w2[j]! / members.length;
    offset += h;
  }
  return {
    inputSize: n,
    hiddenUnits: total,
    mean: first.mean.slice(),
    std: first.std.slice(),
    w1,
    b1,
    w2,
    b2: members.reduce((s, m) => s + m.b2, 0) / members.length,
    ...(first.tokens ? { tokens: { vocabSize: first.tokens.vocabSize, ids: first.tokens.ids.slice(), vectors } } : {}),
  };
}
