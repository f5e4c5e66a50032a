// The router's `token` group (a learned vector per proposed token) and ensembles merged into one MLP:
// exact against the TypeScript MLP, through router.onnx, the batch scorer and the runtime.
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OnnxRouter, type RouterJson } from '../src/edge/routing/router.ts';
import { readJsonFile } from '../src/shared/model/model-pack.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { scoreWithRouterPack } from '../src/tools/router/batch-scorer.ts';
import { auc } from '../src/tools/router/classifier-metrics.ts';
import { hiddenLayer, initialWeights, mergeMembers, outputLogit, predict, sigmoid, standardize, tokenRow, type MlpWeights } from '../src/tools/router/mlp.ts';
import { writeRouterPack } from '../src/tools/router/router-pack.ts';
import { freshTokenVectors, MIN_TOKEN_RECORDS, trainMlp } from '../src/tools/router/train-mlp.ts';

const work = mkdtempSync(join(tmpdir(), 'router-token-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const VOCAB = 40;
const HIDDEN = 6;

/** Rows whose label depends only on the proposed token (even ids: keep), with noise features. */
function tokenTask(rows: number, seed: number) {
  const random = seededRandom(seed);
  const features = Float32Array.from({ length: rows * HIDDEN }, () => random() * 2 - 1);
  // Ids 0..29 are common; 30..39 appear once each, fewer than MIN_TOKEN_RECORDS times.
  const proposed = Int32Array.from({ length: rows }, (_, i) => (i < 10 ? 30 + i : Math.floor(random() * 30)));
  const labels = Uint8Array.from(proposed, (id) => (id % 2 === 0 ? 1 : 0));
  return { features, proposed, labels, rows };
}

function logitOf(w: MlpWeights, raw: Float32Array, proposed: number): number {
  const z = new Float64Array(w.hiddenUnits);
  hiddenLayer(w, standardize(w, raw, 1), z, w.tokens ? tokenRow(w.tokens, proposed) : -1);
  return outputLogit(w, z);
}

describe('token vectors', () => {
  test('ids proposed at least MIN_TOKEN_RECORDS times get a row of their own; the rest, and ids past the vocabulary, share the last', () => {
    const proposed = Int32Array.from([...Array(MIN_TOKEN_RECORDS).fill(5), ...Array(MIN_TOKEN_RECORDS - 1).fill(2), ...Array(MIN_TOKEN_RECORDS).fill(9)]);
    const tokens = freshTokenVectors(proposed, 10, 3);
    expect([...tokens.ids]).toEqual([5, 9]);
    expect(tokens.vectors.length).toBe(3 * 3);
    expect(tokens.vectors.every((v) => v === 0)).toBe(true);
    expect([5, 9, 2, 0, 10, 1_000].map((id) => tokenRow(tokens, id))).toEqual([0, 1, 2, 2, 2, 2]);
  });

  test('an MLP with token vectors learns what only the token tells; one without cannot', () => {
    const train = tokenTask(3000, 1);
    const validation = tokenTask(600, 2);
    const options = { inputSize: HIDDEN, hiddenUnits: 8, seed: 3, maxEpochs: 15, learningRate: 0.01 };
    const withTokens = trainMlp(train, validation, { ...options, tokenVocabSize: VOCAB });
    const without = trainMlp(train, validation, options);
    const scoresWith = predict(withTokens.weights, validation.features, validation.rows, validation.proposed);
    const scoresWithout = predict(without.weights, validation.features, validation.rows);
    expect(auc(scoresWith, validation.labels)).toBeGreaterThan(0.95);
    expect(auc(scoresWithout, validation.labels)).toBeLessThan(0.6);
    expect(withTokens.weights.tokens!.ids.length).toBe(30);
    // Deterministic for a seed.
    expect(trainMlp(train, validation, { ...options, tokenVocabSize: VOCAB }).weights).toEqual(withTokens.weights);
  });

  test('router.onnx, the batch scorer and the runtime give the MLP scores, the proposed token being the logits argmax', async () => {
    const train = tokenTask(2000, 4);
    const { weights } = trainMlp(train, train, { inputSize: HIDDEN, hiddenUnits: 5, seed: 5, maxEpochs: 3, tokenVocabSize: VOCAB });
    const out = join(work, 'token-router');
    await writeRouterPack(out, { weights, meta: { hidden_size: HIDDEN, slm: 'x', default_threshold: 0.5, features: ['hidden', 'token'] }, source: {} });
    const probe = tokenTask(50, 6);
    // An id past the vocabulary selects the shared row, as in the TypeScript MLP.
    probe.proposed[0] = VOCAB + 7;
    const expected = predict(weights, probe.features, probe.rows, probe.proposed);
    const batch = await scoreWithRouterPack(out, { count: probe.rows, hidden: probe.features, proposed: probe.proposed });
    for (let i = 0; i < probe.rows; i++) expect(Math.abs(batch[i]! - expected[i]!)).toBeLessThan(1e-5);

    const router = await OnnxRouter.load(out);
    try {
      expect(router.info.features).toEqual(['hidden', 'token']);
      for (const i of [1, 2, 3, 20]) {
        const logits = new Float32Array(VOCAB).fill(-1);
        logits[probe.proposed[i]!] = 2;
        const score = await router.score(probe.features.slice(i * HIDDEN, (i + 1) * HIDDEN), logits);
        expect(Math.abs(score - expected[i]!)).toBeLessThan(1e-5);
      }
      await expect(router.score(probe.features.slice(0, HIDDEN))).rejects.toThrow("reads the edge model's logits; the caller gave none");
    } finally {
      await router.release();
    }
  });

  test('a pack whose router.json reads the token but whose router.onnx does not is refused', async () => {
    const out = join(work, 'tokenless-router');
    await writeRouterPack(out, { weights: initialWeights(HIDDEN, 4, 0), meta: { hidden_size: HIDDEN, slm: 'x', default_threshold: 0.5 }, source: {} });
    const meta = readJsonFile(join(out, 'router.json')) as RouterJson;
    writeFileSync(join(out, 'router.json'), JSON.stringify({ ...meta, features: ['hidden', 'token'] }));
    await expect(OnnxRouter.load(out)).rejects.toThrow("router.json's features (hidden, token) do not match router.onnx's inputs (hidden_states)");
  });
});

describe('ensembles', () => {
  test("the merged MLP's logit is the mean of its members' logits, token vectors included, and exports as one", async () => {
    const train = tokenTask(1500, 7);
    const members = [0, 1, 2].map((seed) => trainMlp(train, train, { inputSize: HIDDEN, hiddenUnits: 4, seed, maxEpochs: 2, tokenVocabSize: VOCAB }).weights);
    const merged = mergeMembers(members);
    expect(merged.hiddenUnits).toBe(12);
    const probe = tokenTask(30, 8);
    const scores = predict(merged, probe.features, probe.rows, probe.proposed);
    for (let i = 0; i < probe.rows; i++) {
      const row = probe.features.slice(i * HIDDEN, (i + 1) * HIDDEN);
      const mean = members.reduce((s, m) => s + logitOf(m, row, probe.proposed[i]!), 0) / members.length;
      expect(Math.abs(logitOf(merged, row, probe.proposed[i]!) - mean)).toBeLessThan(1e-6); // w2 / K is rounded to float32
      expect(Math.abs(scores[i]! - sigmoid(mean))).toBeLessThan(1e-6);
    }
    // Members differ (different seeds), so the mean is not any one of them.
    expect(
      Math.abs(
        logitOf(members[0]!, probe.features.slice(0, HIDDEN), probe.proposed[0]!) - logitOf(members[1]!, probe.features.slice(0, HIDDEN), probe.proposed[0]!),
      ),
    ).toBeGreaterThan(1e-4);

    const out = join(work, 'ensemble-router');
    await writeRouterPack(out, { weights: merged, meta: { hidden_size: HIDDEN, slm: 'x', default_threshold: 0.5, features: ['hidden', 'token'] }, source: {} });
    const batch = await scoreWithRouterPack(out, { count: probe.rows, hidden: probe.features, proposed: probe.proposed });
    for (let i = 0; i < probe.rows; i++) expect(Math.abs(batch[i]! - scores[i]!)).toBeLessThan(1e-5);
  });

  test('one member merges to itself; members over different standardizations are refused', () => {
    const a = { ...initialWeights(3, 2, 0), mean: Float32Array.of(1, 2, 3) };
    expect(mergeMembers([a])).toEqual(a);
    expect(() => mergeMembers([a, initialWeights(3, 2, 1)])).toThrow('share their inputs and standardization');
  });
});
