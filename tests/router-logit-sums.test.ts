/**
 * The router call's logit statistics at a large vocabulary: the one-pass extremes, the exponential sums
 * computed by onnxruntime, a whole OnnxRouter call and the built-in top-1 scorer, each against a
 * straightforward reference (softmax written out in float64, sorting for the top two) on 151,936 logits,
 * the Qwen2.5-0.5B row.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogitSums, ONNX_SUMS_MIN_LENGTH } from '../src/edge/routing/logit-sums.ts';
import { OnnxRouter, TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { logitExtremes, logitStats, statsFromSums } from '../src/edge/routing/router-features.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { MlpRouter } from '../src/tools/router/mlp-router.ts';
import { initialWeights } from '../src/tools/router/mlp.ts';
import { writeRouterPack } from '../src/tools/router/router-pack.ts';

const VOCAB = 151_936;
const work = mkdtempSync(join(tmpdir(), 'router-logit-sums-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Softmax spelled out: probabilities in float64, entropy −Σ p ln p, the top two by sorting. */
function reference(logits: Float32Array): { entropy: number; top1: number; margin: number; argmax: number } {
  const values = Array.from(logits);
  const max = values.reduce((m, v) => (v > m ? v : m), -Infinity);
  const exps = values.map((v) => Math.exp(v - max));
  const z = exps.reduce((a, b) => a + b, 0);
  const p = exps.map((e) => e / z);
  const entropy = -p.reduce((s, q) => (q > 0 ? s + q * Math.log(q) : s), 0);
  const order = values.map((_, i) => i).sort((a, b) => values[b]! - values[a]! || a - b);
  return { entropy, top1: p[order[0]!]!, margin: p[order[0]!]! - p[order[1]!]!, argmax: order[0]! };
}

/** Seeded logits: a spread like a real model's (most far below the top), a narrow one like a random-weight model's, and one with a tie at the top. */
function rows(): Record<string, Float32Array> {
  const random = seededRandom(11);
  const wide = Float32Array.from({ length: VOCAB }, () => (random() - 0.5) * 30);
  wide[1234] = 25;
  wide[99] = 23.5;
  const narrow = Float32Array.from({ length: VOCAB }, () => (random() - 0.5) * 2);
  const tie = narrow.slice();
  tie[500] = 3;
  tie[70_000] = 3;
  return { wide, narrow, tie };
}

describe('logit statistics of a 151,936-entry row', () => {
  const cases = rows();

  for (const [name, logits] of Object.entries(cases)) {
    test(`${name}: the JavaScript path equals the reference to float64 rounding`, () => {
      const want = reference(logits);
      const got = logitStats(logits);
      expect(got.argmax).toBe(want.argmax);
      expect(got.entropy).toBeCloseTo(want.entropy, 9);
      expect(got.top1).toBeCloseTo(want.top1, 12);
      expect(got.margin).toBeCloseTo(want.margin, 12);
    });

    // onnxruntime adds the 151,936 exponentials in float32, so its sums carry rounding of a few 1e-5 relative
    // (2e-5 measured on the wide row), where the reference adds in float64.
    test(`${name}: the onnxruntime sums give the same statistics within float32 summation tolerance`, async () => {
      const sums = await LogitSums.create();
      try {
        const want = reference(logits);
        const extremes = logitExtremes(logits);
        const got = statsFromSums(extremes, await sums.compute(logits, extremes.max));
        expect(got.argmax).toBe(want.argmax);
        expect(Math.abs(got.entropy - want.entropy)).toBeLessThan(1e-4 * Math.max(1, want.entropy));
        expect(Math.abs(got.top1 - want.top1)).toBeLessThan(1e-4 * want.top1);
        expect(Math.abs(got.margin - want.margin)).toBeLessThan(1e-4 * want.top1);
      } finally {
        await sums.release();
      }
    });
  }

  test('a tie at the top: margin 0, the first index wins', () => {
    const got = logitStats(cases.tie!);
    expect(got.argmax).toBe(500);
    expect(got.margin).toBe(0);
  });

  test('the built-in scorer gives the top-1 probability of a long row (onnxruntime sums) and of a short one (exact)', async () => {
    const scorer = new TopProbabilityScorer();
    try {
      for (const logits of Object.values(cases)) {
        const want = reference(logits).top1;
        const got = await scorer.score(new Float32Array(0), logits);
        expect(Math.abs(got - want)).toBeLessThan(1e-4 * want);
      }
      const short = cases.wide!.slice(0, ONNX_SUMS_MIN_LENGTH - 1);
      expect(await scorer.score(new Float32Array(0), short)).toBeCloseTo(reference(short).top1, 12);
    } finally {
      await scorer.release();
    }
  });

  test('a whole router call scores as the TypeScript MLP over the reference features does', async () => {
    expect(VOCAB).toBeGreaterThanOrEqual(ONNX_SUMS_MIN_LENGTH); // the onnxruntime path is the one under test
    const hiddenSize = 16;
    const features = ['hidden', 'logit_stats', 'repetition'] as const;
    const weights = initialWeights(hiddenSize + 8, 8, 3);
    // Output weights that make the score depend visibly on the logit statistics (the random init may not).
    weights.b2 = 0.1;
    await writeRouterPack(join(work, 'router'), {
      weights,
      meta: { hidden_size: hiddenSize, slm: '.', default_threshold: 0.5, features: [...features] },
      source: {},
    });
    const router = await OnnxRouter.load(join(work, 'router'));
    const reference = new MlpRouter(weights, features);
    const random = seededRandom(5);
    const hidden = Float32Array.from({ length: hiddenSize }, () => random() * 2 - 1);
    try {
      for (const logits of Object.values(cases)) {
        // The proposed token repeats the last id, so the repetition features are not all zero.
        const context = [1, 2, 3, 2, 3, logitExtremes(logits).argmax];
        const got = await router.score(hidden, logits, context);
        const want = await reference.score(hidden, logits, context);
        expect(Math.abs(got - want)).toBeLessThan(1e-5);
      }
    } finally {
      await router.release();
    }
  });
});
