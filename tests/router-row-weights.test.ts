/** Row weights in the router's loss (`--rollout-weight`): the weighted log loss, and what training does with them. */
import { describe, expect, test } from 'bun:test';
import { logLoss } from '../src/tools/router/classifier-metrics.ts';
import { predict } from '../src/tools/router/mlp.ts';
import { trainMlp, type Dataset } from '../src/tools/router/train-mlp.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';

/** Rows with random features; `targetOf(r)` gives each row's soft target. */
function dataset(rows: number, inputSize: number, seed: number, targetOf: (r: number, row: Float32Array) => number): Dataset {
  const random = seededRandom(seed);
  const features = Float32Array.from({ length: rows * inputSize }, () => random() * 2 - 1);
  const targets = Float32Array.from({ length: rows }, (_, r) => targetOf(r, features.subarray(r * inputSize, (r + 1) * inputSize)));
  return { features, targets, labels: Uint8Array.from(targets, (t) => (t >= 0.5 ? 1 : 0)), rows };
}

describe('row weights', () => {
  test('the weighted log loss is the weighted mean of the rows’ cross-entropies', () => {
    expect(logLoss([0.5, 0.9], [1, 1], [3, 1])).toBeCloseTo((3 * Math.log(2) - Math.log(0.9)) / 4, 12);
    expect(logLoss([0.5, 0.9], [1, 1], [1, 1])).toBe(logLoss([0.5, 0.9], [1, 1]));
    expect(logLoss([0.5], [1], [0])).toBeNaN();
  });

  test('weights of 1 train exactly what no weights do', () => {
    const data = dataset(200, 6, 1, (_, row) => (row[0]! > 0 ? 0.8 : 0.3));
    const options = { inputSize: 6, hiddenUnits: 4, seed: 2, maxEpochs: 3 };
    const plain = trainMlp(data, data, options);
    const ones = { ...data, weights: new Float32Array(data.rows).fill(1) };
    expect(trainMlp(ones, ones, options)).toEqual(plain);
  });

  test('a row weighing three times another pulls the fit three times as hard', () => {
    // Pairs of rows with the same features and opposite targets: the best score for both is the weighted
    // mean of their targets, 0.5 unweighted and 0.75 with the target-1 row weighing 3.
    const rows = 400;
    const base = dataset(rows / 2, 4, 3, () => 0);
    const features = new Float32Array(rows * 4);
    features.set(base.features, 0);
    features.set(base.features, base.features.length);
    const targets = Float32Array.from({ length: rows }, (_, r) => (r < rows / 2 ? 1 : 0));
    const data: Dataset = { features, targets, labels: Uint8Array.from(targets), rows };
    const weighted: Dataset = { ...data, weights: Float32Array.from({ length: rows }, (_, r) => (r < rows / 2 ? 3 : 1)) };
    const options = { inputSize: 4, hiddenUnits: 4, seed: 5, maxEpochs: 40, learningRate: 1e-2, patience: 40 };
    const mean = (d: Dataset) => {
      const scores = predict(trainMlp(d, d, options).weights, d.features, d.rows);
      return scores.reduce((s, x) => s + x, 0) / scores.length;
    };
    expect(mean(data)).toBeCloseTo(0.5, 1);
    expect(mean(weighted)).toBeCloseTo(0.75, 1);
  });
});
