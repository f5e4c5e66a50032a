/**
 * Trains the router MLP: binary cross-entropy, Adam, shuffled mini-batches, and early stopping on the
 * validation loss (the best epoch's weights are kept). Deterministic for a seed: initialization and
 * shuffling use the project's seeded generator and all arithmetic is ordinary JS numbers.
 */
import { seededRandom } from '../../shared/seeded-random.ts';
import { logLoss } from './classifier-metrics.ts';
import {
  cloneWeights,
  hiddenLayer,
  initialWeights,
  outputLogit,
  predictStandardized,
  sigmoid,
  standardize,
  tokenRow,
  type MlpWeights,
  type TokenVectors,
} from './mlp.ts';

export interface Dataset {
  /** `[rows, inputSize]` row-major. */
  features: Float32Array;
  /** Binary labels (1 = keep): what AUC and accuracy are measured against. */
  labels: Uint8Array;
  /** Cross-entropy targets in [0, 1] when they are soft (the gain rule); `labels` otherwise. */
  targets?: Float32Array;
  rows: number;
  /** The edge's proposed token (top-1) of each row: the `token` group's input. */
  proposed?: Int32Array;
  /** Each row's weight in the loss, training and validation alike (1 each when absent): `--rollout-weight`. */
  weights?: Float32Array;
}

/** Adam's step size when none is given. */
export const DEFAULT_LEARNING_RATE = 1e-3;

/** A proposed token needs this many training records for a row of its own; rarer ones share the last row. */
export const MIN_TOKEN_RECORDS = 8;

/** Zero token vectors (a token changes nothing until trained) for the ids proposed often enough in `proposed`. */
export function freshTokenVectors(proposed: Int32Array, vocabSize: number, hiddenUnits: number): TokenVectors {
  const counts = new Map<number, number>();
  for (const id of proposed) counts.set(id, (counts.get(id) ?? 0) + 1);
  const ids = Int32Array.from([...counts].filter(([id, c]) => c >= MIN_TOKEN_RECORDS && id < vocabSize).map(([id]) => id)).sort();
  return { vocabSize, ids, vectors: new Float32Array((ids.length + 1) * hiddenUnits) };
}

export interface EpochReport {
  epoch: number;
  trainLoss: number;
  validationLoss: number;
}

export interface TrainMlpOptions {
  inputSize: number;
  hiddenUnits: number;
  seed: number;
  maxEpochs: number;
  batchSize?: number;
  learningRate?: number;
  /** Epochs without a better validation loss before stopping. */
  patience?: number;
  /**
   * Start from these weights (and keep their standardization) instead of fresh ones: an on-policy round
   * continues from the previous round's router, so it needs a few epochs, not a whole fit.
   */
  initial?: MlpWeights;
  /** Learn a vector per proposed token (the `token` group) over this vocabulary; the datasets must carry `proposed`. */
  tokenVocabSize?: number;
  onEpoch?: (report: EpochReport) => void;
}

export interface TrainMlpResult {
  /** The weights of the epoch with the lowest validation loss. */
  weights: MlpWeights;
  epochsRun: number;
  bestEpoch: number;
  history: EpochReport[];
}

/** Per-feature mean and standard deviation (a constant feature gets std 1). */
export function featureStats(features: Float32Array, rows: number, inputSize: number): { mean: Float32Array; std: Float32Array } {
  const sum = new Float64Array(inputSize);
  const sumSq = new Float64Array(inputSize);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < inputSize; i++) {
      const v = features[r * inputSize + i]!;
      sum[i] += v;
      sumSq[i] += v * v;
    }
  }
  const mean = new Float32Array(inputSize);
  const std = new Float32Array(inputSize);
  for (let i = 0; i < inputSize; i++) {
    const m = sum[i]! / rows;
    const variance = Math.max(0, sumSq[i]! / rows - m * m);
    mean[i] = m;
    std[i] = Math.sqrt(variance) > 1e-6 ? Math.sqrt(variance) : 1;
  }
  return { mean, std };
}

class Adam {
  private readonly m: Float64Array;
  private readonly v: Float64Array;
  private t = 0;

  constructor(
    size: number,
    private readonly lr: number,
    private readonly beta1 = 0.9,
    private readonly beta2 = 0.999,
    private readonly eps = 1e-8,
  ) {
    this.m = new Float64Array(size);
    this.v = new Float64Array(size);
  }

  /** Applies one step to `params` (views of one flat parameter vector, in a fixed order). */
  step(params: (Float32Array | Float64Array)[], grads: Float64Array[]): void {
    this.t++;
    const c1 = 1 - this.beta1 ** this.t;
    const c2 = 1 - this.beta2 ** this.t;
    let k = 0;
    for (const [p, param] of params.entries()) {
      const grad = grads[p]!;
      for (let i = 0; i < param.length; i++, k++) {
        const g = grad[i]!;
        this.m[k] = this.beta1 * this.m[k]! + (1 - this.beta1) * g;
        this.v[k] = this.beta2 * this.v[k]! + (1 - this.beta2) * g * g;
        param[i] -= (this.lr * (this.m[k]! / c1)) / (Math.sqrt(this.v[k]! / c2) + this.eps);
      }
    }
  }
}

interface Gradients {
  gw1: Float64Array;
  gb1: Float64Array;
  gw2: Float64Array;
  gb2: Float64Array;
  gTokens: Float64Array | undefined;
}

/**
 * Adds one row's gradients (back-propagated from `dz2`, d(BCE)/d(logit), soft targets too) to the
 * batch's. A function of its own rather than a block inside trainMlp's loop: Bun's JIT compiled that
 * loop, big and entered mid-way, inconsistently (the same epoch ran many times slower in some runs).
 */
function addRowGradients(weights: MlpWeights, row: Float32Array, z1: Float64Array, dz2: number, tokenAt: number, g: Gradients, dz1: Float64Array): void {
  const { inputSize: n, hiddenUnits: h, w2 } = weights;
  g.gb2[0] += dz2;
  let any = false;
  for (let j = 0; j < h; j++) {
    if (z1[j]! > 0) {
      g.gw2[j] += dz2 * z1[j]!;
      dz1[j] = dz2 * w2[j]!;
      g.gb1[j] += dz1[j]!;
      any = true;
    } else {
      dz1[j] = 0;
    }
  }
  if (!any) return;
  if (g.gTokens) for (let j = 0; j < h; j++) g.gTokens[tokenAt * h + j] += dz1[j]!;
  const gw1 = g.gw1;
  for (let i = 0; i < n; i++) {
    const xi = row[i]!;
    if (xi === 0) continue;
    const base = i * h;
    for (let j = 0; j < h; j++) gw1[base + j] += xi * dz1[j]!;
  }
}

function shuffle(order: Int32Array, random: () => number): void {
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = order[i]!;
    order[i] = order[j]!;
    order[j] = t;
  }
}

export function trainMlp(train: Dataset, validation: Dataset, options: TrainMlpOptions): TrainMlpResult {
  const { inputSize: n, hiddenUnits: h, maxEpochs } = options;
  const batchSize = options.batchSize ?? 128;
  const patience = options.patience ?? 3;
  const targets = train.targets ?? train.labels;
  const validationTargets = validation.targets ?? validation.labels;
  let ones = 0;
  let rowWeights = 0;
  for (let r = 0; r < train.rows; r++) {
    const w = train.weights ? train.weights[r]! : 1;
    ones += w * targets[r]!;
    rowWeights += w;
  }

  const fresh = (): MlpWeights => {
    const w: MlpWeights = { ...initialWeights(n, h, options.seed, ones / rowWeights), ...featureStats(train.features, train.rows, n) };
    if (options.tokenVocabSize !== undefined) w.tokens = freshTokenVectors(train.proposed!, options.tokenVocabSize, h);
    return w;
  };
  const weights = options.initial ? cloneWeights(options.initial) : fresh();
  if (weights.inputSize !== n || weights.hiddenUnits !== h)
    throw new Error(`internal: initial weights are ${weights.inputSize}×${weights.hiddenUnits}, not ${n}×${h}`);
  if (weights.tokens && (!train.proposed || !validation.proposed))
    throw new Error('internal: a router with token vectors needs the proposed tokens of every row');
  const x = standardize(weights, train.features, train.rows);
  const xVal = standardize(weights, validation.features, validation.rows);
  const rowOfToken = weights.tokens ? Int32Array.from(train.proposed!, (id) => tokenRow(weights.tokens!, id)) : undefined;
  // b2 lives in a one-element array while training so that Adam can update it like the others.
  const b2 = new Float64Array([weights.b2]);
  const params = [weights.w1, weights.b1, weights.w2, b2, ...(weights.tokens ? [weights.tokens.vectors] : [])];
  const grads = params.map((p) => new Float64Array(p.length));
  const [gw1, gb1, gw2, gb2, gTokens] = grads as [Float64Array, Float64Array, Float64Array, Float64Array, Float64Array | undefined];
  const gradients: Gradients = { gw1, gb1, gw2, gb2, gTokens };
  const adam = new Adam(
    params.reduce((s, p) => s + p.length, 0),
    options.learningRate ?? DEFAULT_LEARNING_RATE,
  );
  const random = seededRandom(options.seed ^ 0x9e3779b9);
  const order = Int32Array.from({ length: train.rows }, (_, i) => i);
  const z1 = new Float64Array(h);
  const dz1 = new Float64Array(h);

  const history: EpochReport[] = [];
  // A warm start is itself a candidate: a round whose epochs all do worse keeps it.
  let best = {
    loss: options.initial ? logLoss(predictStandardized(weights, xVal, validation.rows, validation.proposed), validationTargets, validation.weights) : Infinity,
    epoch: 0,
    weights: cloneWeights(weights),
  };
  for (let epoch = 1; epoch <= maxEpochs; epoch++) {
    shuffle(order, random);
    let lossSum = 0;
    for (let start = 0; start < train.rows; start += batchSize) {
      const end = Math.min(train.rows, start + batchSize);
      for (const g of grads) g.fill(0);
      weights.b2 = b2[0]!;
      for (let k = start; k < end; k++) {
        const r = order[k]!;
        const row = x.subarray(r * n, (r + 1) * n);
        const tokenAt = rowOfToken ? rowOfToken[r]! : -1;
        hiddenLayer(weights, row, z1, tokenAt);
        const p = sigmoid(outputLogit(weights, z1));
        const y = targets[r]!;
        const w = train.weights ? train.weights[r]! : 1;
        lossSum -= w * (y * Math.log(Math.max(p, 1e-12)) + (1 - y) * Math.log(Math.max(1 - p, 1e-12)));
        addRowGradients(weights, row, z1, w * (p - y), tokenAt, gradients, dz1);
      }
      const scale = 1 / (end - start);
      for (const g of grads) for (let i = 0; i < g.length; i++) g[i] *= scale;
      adam.step(params, grads);
    }
    weights.b2 = b2[0]!;
    const validationLoss = logLoss(predictStandardized(weights, xVal, validation.rows, validation.proposed), validationTargets, validation.weights);
    const report = { epoch, trainLoss: lossSum / rowWeights, validationLoss };
    history.push(report);
    options.onEpoch?.(report);
    if (validationLoss < best.loss) best = { loss: validationLoss, epoch, weights: cloneWeights(weights) };
    else if (epoch - best.epoch >= patience) break;
  }
  return { weights: best.weights, epochsRun: history.length, bestEpoch: best.epoch, history };
}
