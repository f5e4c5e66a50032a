import { describe, expect, test } from 'bun:test';
import { accuracyAt, auc, labelBalance, logLoss } from '../src/tools/router/classifier-metrics.ts';
import { citerLabel, citerLabels } from '../src/tools/router/labels.ts';
import { foldStandardization, initialWeights, MAX_SCORE, predict, type MlpWeights } from '../src/tools/router/mlp.ts';
import { routingCurve } from '../src/tools/router/routing-curve.ts';
import type { TeacherForced } from '../src/tools/lab/forced-records.ts';
import { selectParagraphs } from '../src/tools/lab/forced-selection.ts';
import { ALL_EXTRA_WIDTH } from '../src/tools/lab/feature-matrix.ts';
import { splitByParagraph, splitParagraphs } from '../src/tools/lab/text-corpus.ts';
import { featureStats, trainMlp } from '../src/tools/router/train-mlp.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';

describe('AUC (Mann–Whitney)', () => {
  test('a hand-computed example: 3 of 4 positive/negative pairs ordered right', () => {
    // positives 0.35, 0.8; negatives 0.1, 0.4: (0.35 > 0.1), (0.35 < 0.4), (0.8 > both) → 3/4
    expect(auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])).toBe(0.75);
  });

  test('ties count one half', () => {
    // positives 0.5, 0.9; negatives 0.5, 0.2: pairs (0.5~0.5 → ½), (0.5 > 0.2), (0.9 > 0.5), (0.9 > 0.2) → 3.5/4
    expect(auc([0.5, 0.9, 0.5, 0.2], [1, 1, 0, 0])).toBe(0.875);
    expect(auc([0.3, 0.3, 0.3], [1, 0, 1])).toBe(0.5);
  });

  test('perfect, reversed and one-class inputs', () => {
    expect(auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])).toBe(1);
    expect(auc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0])).toBe(0);
    expect(auc([0.1, 0.2], [1, 1])).toBeNaN();
  });

  test('agrees with counting pairs on random data', () => {
    const random = seededRandom(3);
    const scores = Array.from({ length: 300 }, () => Math.round(random() * 20) / 20); // many ties
    const labels = scores.map((s) => (random() < s ? 1 : 0));
    let wins = 0;
    let pairs = 0;
    for (let i = 0; i < scores.length; i++) {
      for (let j = 0; j < scores.length; j++) {
        if (labels[i] !== 1 || labels[j] !== 0) continue;
        pairs++;
        wins += scores[i]! > scores[j]! ? 1 : scores[i] === scores[j] ? 0.5 : 0;
      }
    }
    expect(auc(scores, labels)).toBeCloseTo(wins / pairs, 12);
  });

  test('accuracy, label balance, log loss', () => {
    expect(accuracyAt([0.2, 0.6, 0.5, 0.4], [0, 1, 0, 0], 0.5)).toBe(0.75);
    expect(labelBalance([1, 0, 1, 1])).toBe(0.75);
    expect(logLoss([0.5, 0.5], [1, 0])).toBeCloseTo(Math.log(2), 12);
  });
});

describe('labels and routing', () => {
  test('CITER shortcut: route only when the cloud is right and the edge is wrong', () => {
    expect(citerLabel(true, true)).toBe(1);
    expect(citerLabel(true, false)).toBe(1);
    expect(citerLabel(false, true)).toBe(0);
    expect(citerLabel(false, false)).toBe(1); // a route cannot fix it: keep the edge token
    const forced = { count: 4, edgeCorrect: Uint8Array.of(1, 1, 0, 0), cloudCorrect: Uint8Array.of(1, 0, 1, 0) };
    expect([...citerLabels(forced)]).toEqual([1, 1, 0, 1]);
  });

  test('the routing curve counts the cloud for routed positions and the edge for the others', () => {
    const forced = { count: 4, edgeCorrect: Uint8Array.of(1, 0, 0, 1), cloudCorrect: Uint8Array.of(1, 1, 1, 0) };
    const curve = routingCurve(forced, [0.9, 0.1, 0.4, 0.6], [0, 0.3, 0.5, 1]);
    expect(curve.smallOnlyAccuracy).toBe(0.5);
    expect(curve.largeOnlyAccuracy).toBe(0.75);
    expect(curve.points).toEqual([
      { threshold: 0, routedRatio: 0, accuracy: 0.5 },
      { threshold: 0.3, routedRatio: 0.25, accuracy: 0.75 },
      { threshold: 0.5, routedRatio: 0.5, accuracy: 1 },
      { threshold: 1, routedRatio: 1, accuracy: 0.75 },
    ]);
  });

  test('paragraph splits: blank lines separate, order decides train and held-out parts', () => {
    const paragraphs = splitParagraphs('  a b \n\n\nc\n \nd\n\n e ');
    expect(paragraphs).toEqual(['a b', 'c', 'd', 'e']);
    expect(splitByParagraph(paragraphs, 0.5)).toEqual({ train: ['a b', 'c'], heldOut: ['d', 'e'] });
    const forced: TeacherForced = {
      hiddenSize: 2,
      count: 3,
      hidden: Float32Array.of(1, 2, 3, 4, 5, 6),
      previousHidden: Float32Array.of(0, 0, -1, -2, -3, -4),
      extra: Float32Array.from({ length: 3 * ALL_EXTRA_WIDTH }, (_, i) => i),
      edgeCorrect: Uint8Array.of(1, 0, 1),
      cloudCorrect: Uint8Array.of(0, 0, 1),
      cloudProbOfEdgeTop1: Float32Array.of(0.5, 0.25, 0.75),
      cloudTopProb: Float32Array.of(0.5, 0.5, 0.75),
      proposed: Int32Array.of(3, 4, 5),
      cloudTop: Int32Array.of(3, 6, 5),
      repeatsFourGram: Uint8Array.of(0, 1, 0),
      cloudRepeatsFourGram: Uint8Array.of(1, 0, 1),
      nextId: Int32Array.of(7, 8, 9),
      paragraph: Int32Array.of(0, 1, 1),
      windowed: 0,
    };
    const second = selectParagraphs(forced, (p) => p === 1);
    expect([...second.hidden]).toEqual([3, 4, 5, 6]);
    expect([...second.previousHidden]).toEqual([-1, -2, -3, -4]);
    expect([...second.extra]).toEqual(Array.from({ length: 2 * ALL_EXTRA_WIDTH }, (_, i) => i + ALL_EXTRA_WIDTH));
    expect([...second.edgeCorrect]).toEqual([0, 1]);
    expect([...second.cloudProbOfEdgeTop1]).toEqual([0.25, 0.75]);
    expect([...second.nextId]).toEqual([8, 9]);
    expect([...second.cloudTop]).toEqual([6, 5]);
    expect([...second.repeatsFourGram]).toEqual([1, 0]);
    expect([...second.cloudRepeatsFourGram]).toEqual([0, 1]);
  });
});

describe('the MLP', () => {
  function randomMlp(seed: number): MlpWeights {
    const w = initialWeights(5, 4, seed);
    const random = seededRandom(seed + 1);
    w.mean = Float32Array.from({ length: 5 }, () => random() * 4 - 2);
    w.std = Float32Array.from({ length: 5 }, () => 0.5 + random() * 3);
    w.b1 = Float32Array.from({ length: 4 }, () => random() - 0.5);
    return w;
  }

  test('folding the standardization into the first layer changes no pre-activation', () => {
    const w = randomMlp(1);
    const folded = { ...w, ...foldStandardization(w), mean: new Float32Array(5), std: new Float32Array(5).fill(1) };
    const random = seededRandom(9);
    const x = Float32Array.from({ length: 50 }, () => random() * 6 - 3);
    const a = predict(w, x, 10);
    const b = predict(folded, x, 10);
    for (let i = 0; i < 10; i++) expect(b[i]!).toBeCloseTo(a[i]!, 6);
  });

  test('scores are capped just below 1', () => {
    const w = initialWeights(1, 1, 0);
    w.w1[0] = 1;
    w.w2[0] = 1;
    w.b2 = 100;
    const [score] = predict(w, Float32Array.of(5), 1);
    expect(score).toBe(MAX_SCORE);
    expect(score).toBeLessThan(1);
  });

  test('learns a separable problem and stops early when validation loss stops improving', () => {
    const random = seededRandom(5);
    const rows = 2000;
    const features = Float32Array.from({ length: rows * 3 }, () => random() * 2 - 1);
    const labels = Uint8Array.from({ length: rows }, (_, r) => (features[r * 3]! + 0.5 * features[r * 3 + 1]! > 0 ? 1 : 0));
    const half = rows / 2;
    const train = { features: features.subarray(0, half * 3), labels: labels.subarray(0, half), rows: half };
    const validation = { features: features.subarray(half * 3), labels: labels.subarray(half), rows: half };
    const result = trainMlp(train, validation, { inputSize: 3, hiddenUnits: 8, seed: 1, maxEpochs: 200, learningRate: 0.01, patience: 3 });
    expect(result.epochsRun).toBeLessThan(200);
    expect(result.bestEpoch).toBe(result.epochsRun - 3);
    const scores = predict(result.weights, validation.features, validation.rows);
    expect(auc(scores, validation.labels)).toBeGreaterThan(0.98);
    expect(accuracyAt(scores, validation.labels)).toBeGreaterThan(0.95);
  });

  test('feature statistics: a constant feature gets std 1', () => {
    const { mean, std } = featureStats(Float32Array.of(1, 5, 3, 5), 2, 2);
    expect([...mean]).toEqual([2, 5]);
    expect([...std]).toEqual([1, 1]);
  });
});
