import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { generate, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest } from '../src/edge/request/generation-request.ts';
import { OnnxRouter, type RouterJson } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack, readJsonFile } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { scoreWithRouterPack } from '../src/tools/router/batch-scorer.ts';
import { auc } from '../src/tools/router/classifier-metrics.ts';
import { citerLabels, divergenceLabels } from '../src/tools/router/labels.ts';
import { routerInputs } from '../src/tools/lab/feature-matrix.ts';
import { initialWeights, predict } from '../src/tools/router/mlp.ts';
import { writeRouterPack } from '../src/tools/router/router-pack.ts';
import { routingCurve, type RoutingCurve } from '../src/tools/router/routing-curve.ts';
import type { TeacherForced } from '../src/tools/lab/forced-records.ts';
import { teacherForcePacks } from '../src/tools/lab/teacher-forcing.ts';
import { splitByParagraph } from '../src/tools/lab/text-corpus.ts';
import { trainMlp } from '../src/tools/router/train-mlp.ts';
import { trainRouter } from '../src/tools/router/train-router.ts';
import { demoRouterOptions } from '../src/tools/models/demo.ts';
import { ensureDemoPacks, tinyStoriesParagraphs } from './helpers/demo-packs.ts';
import { perturbationFromEnv, type HiddenStatePerturbation } from './helpers/perturbed-hidden-states.ts';
import { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';

const THRESHOLDS = Array.from({ length: 11 }, (_, i) => i / 10);
const work = mkdtempSync(join(tmpdir(), 'router-training-'));
let demo: Awaited<ReturnType<typeof ensureDemoPacks>>;
/** The demo router, or with PERTURB_HIDDEN_STATES set, one trained the same way from perturbed hidden states. */
let routerPack: string;
let perturbation: HiddenStatePerturbation | undefined;
let meta: RouterJson;
let heldOut: TeacherForced;
let heldOutScores: Float32Array;
let curve: RoutingCurve;

beforeAll(async () => {
  demo = await ensureDemoPacks();
  routerPack = demo.routerPack;
  perturbation = perturbationFromEnv(demo.edgePack);
  if (perturbation) {
    // Another CPU's kernels, simulated: the demo router retrained from hidden states that differ in the last
    // bits; every check in this file must hold for it as for the one built on this machine.
    routerPack = join(work, 'perturbed-demo-router');
    await trainRouter({ ...demoRouterOptions(demo), out: routerPack });
    if (perturbation.perturbedValues === 0) throw new Error('PERTURB_HIDDEN_STATES is set, but training perturbed no hidden state');
  }
  meta = readJsonFile(join(routerPack, 'router.json')) as RouterJson;
  const paragraphs = splitByParagraph(await tinyStoriesParagraphs(), 0.8).heldOut;
  heldOut = await teacherForcePacks(demo.edgePack, demo.cloudPack, paragraphs);
  heldOutScores = await scoreWithRouterPack(routerPack, heldOut);
  curve = routingCurve(heldOut, heldOutScores, THRESHOLDS);
  // Building the demo packs (router training included) takes about half a minute on a fresh checkout; with
  // PERTURB_HIDDEN_STATES the router is trained once more (two minutes on a loaded 2-core machine).
}, 480_000);

afterAll(() => {
  perturbation?.restore();
  rmSync(work, { recursive: true, force: true });
});

describe('the demo router (stories260k-distilled-1l → stories260k, first 80% of the TinyStories excerpt)', () => {
  test('router.json records the training figures; validation AUC is clearly above chance', async () => {
    expect(meta.hidden_size).toBe(64);
    // Relative to the router pack: beside it in models/, elsewhere for a router trained under PERTURB_HIDDEN_STATES.
    expect(resolve(routerPack, meta.slm)).toBe(demo.edgePack);
    expect(resolve(routerPack, meta.llm!)).toBe(demo.cloudPack);
    expect(meta.default_threshold).toBe(demo.routerThreshold);
    expect(meta.features).toEqual(['hidden', 'previous_hidden', 'logit_stats', 'repetition', 'position', 'token']);
    const t = meta.training as {
      label_rule: string;
      rounds: { round: number; added: number; rollout?: { trajectories: number; tokens: number; greedy_outputs: number }; val_auc: number }[];
      train_fraction: number;
      hidden_units: number;
      text_sha256: string;
      examples: number;
      label_balance: number;
      epochs_run: number;
      val_auc: number;
      val_accuracy: number;
    };
    expect(t.train_fraction).toBe(0.8);
    expect(t.hidden_units).toBe(64);
    expect(t.text_sha256).toBe('727e8b228375be3075114c20729c93ed6e81ae5d8fe7faf7cb54b304f0322d70');
    expect(t.examples).toBeGreaterThan(50_000);
    expect(t.label_rule).toBe('citer');
    expect((t as unknown as { on_policy_label_rule: string }).on_policy_label_rule).toBe('divergence');
    // CITER labels: the distilled edge's top-1 is right, or both models are wrong, at 84% of the training positions.
    expect(t.label_balance).toBeGreaterThan(0.8);
    expect(t.label_balance).toBeLessThan(0.9);
    // Two on-policy rounds of 48 prompts, each generated greedily and sampled, 48 tokens each (unless EOS).
    expect(t.rounds.map((r) => r.round)).toEqual([0, 1, 2]);
    expect(t.rounds[0]!.added).toBe(0);
    for (const r of t.rounds.slice(1)) {
      expect(r.rollout!.trajectories).toBe(96);
      expect(r.rollout!.greedy_outputs).toBe(48);
      expect(r.added).toBe(r.rollout!.tokens);
      expect(r.added).toBeGreaterThan(96 * 8);
      expect(r.val_auc).toBeGreaterThan(0.7);
    }
    expect(t.epochs_run).toBeGreaterThanOrEqual(1);
    expect(t.val_auc).toBeGreaterThan(0.6);
    expect(t.val_accuracy).toBeGreaterThan(0.6);
  });

  test('on the held-out 20% the router still separates keep from route', () => {
    // Measured: 0.737 against its own (CITER) labels, 0.755 against divergence's, which its rollouts were labelled by
    // (0.749 and 0.767 on another machine kind: the margin above 0.7 covers kernel differences).
    expect(auc(heldOutScores, citerLabels(heldOut))).toBeGreaterThan(0.7);
    expect(auc(heldOutScores, divergenceLabels(heldOut))).toBeGreaterThan(0.7);
  });

  test('scores lie in [0, 1): τ = 0 routes nothing and τ = 1 routes everything', () => {
    for (const s of heldOutScores) {
      expect(s).toBeGreaterThanOrEqual(0);
      expect(s).toBeLessThan(1);
    }
    expect(curve.points[0]!.routedRatio).toBe(0);
    expect(curve.points.at(-1)!.routedRatio).toBe(1);
    expect(curve.points[0]!.accuracy).toBe(curve.smallOnlyAccuracy);
    expect(curve.points.at(-1)!.accuracy).toBe(curve.largeOnlyAccuracy);
  });

  test('routed ratio rises with τ; accuracy rises from edge-only to cloud-only', () => {
    expect(curve.positions).toBe(heldOut.count);
    expect(curve.largeOnlyAccuracy).toBeGreaterThan(curve.smallOnlyAccuracy);
    const { points } = curve;
    for (let i = 1; i < points.length; i++) {
      expect(points[i]!.routedRatio).toBeGreaterThanOrEqual(points[i - 1]!.routedRatio);
      // Adjacent points may dip by a hair; the curve as a whole must rise.
      expect(points[i]!.accuracy).toBeGreaterThanOrEqual(points[i - 1]!.accuracy - 0.005);
    }
    for (const p of points) {
      expect(p.accuracy).toBeGreaterThanOrEqual(curve.smallOnlyAccuracy);
      expect(p.accuracy).toBeLessThanOrEqual(curve.largeOnlyAccuracy);
    }
    // A router better than chance: at the default τ the accuracy gained per routed token beats random routing.
    const mid = points[Math.round(meta.default_threshold * 10)]!;
    expect(mid.threshold).toBe(meta.default_threshold);
    const randomGain = mid.routedRatio * (curve.largeOnlyAccuracy - curve.smallOnlyAccuracy);
    expect(mid.accuracy - curve.smallOnlyAccuracy).toBeGreaterThan(randomGain);
  });

  test('the default τ (0.8) routes about 36% of the held-out teacher-forced positions, as docs/results.md says', () => {
    const share = routingCurve(heldOut, heldOutScores, [meta.default_threshold]).points[0]!.routedRatio;
    // The share depends on onnxruntime's float results, which differ between CPUs (AVX2, AVX-512, NEON):
    // at τ 0.7 one machine kind measured 22.0% and another 21.4%, and retraining from hidden states perturbed
    // by 1e-6 (PERTURB_HIDDEN_STATES) moved the share at 0.8 from 35.8% by at most 0.2 points. ±2 points is
    // three times the largest difference seen, and still tells a moved default τ (0.75: 27.7%, 0.85: 45.3%).
    console.log(
      `default τ ${meta.default_threshold}: ${(100 * share).toFixed(2)}% of ${heldOut.count} held-out positions routed${perturbation ? ' (router trained under PERTURB_HIDDEN_STATES)' : ''}`,
    );
    expect(Math.abs(share - 0.358)).toBeLessThan(0.02);
  });

  test('the decoder loop with the trained router routes exactly the tokens scored below τ', async () => {
    const edge = await DecoderModel.load(loadModelPack(demo.edgePack));
    const cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
    const router = await OnnxRouter.load(routerPack);
    try {
      const engine = { edgeModel: edge, router, tokenizer: await TextTokenizer.fromPack(demo.edgePack), cloud: new InProcessCloud(cloudModel) };
      const request = parseGenerationRequest({ prompt: 'Once upon a time, there was a little dog', threshold: 0.75, maxNewTokens: 40 });
      const tokens: TokenEvent[] = [];
      for await (const e of generate(engine, request)) if (e.type === 'token') tokens.push(e);
      expect(tokens.some((t) => t.source === 'llm')).toBe(true);
      expect(tokens.some((t) => t.source === 'slm')).toBe(true);
      for (const t of tokens) expect(t.source).toBe(t.score! < 0.75 ? 'llm' : 'slm');
    } finally {
      await router.release();
      await edge.release();
      await cloudModel.release();
    }
  });
});

describe('export', () => {
  test('router.onnx gives the TypeScript MLP scores (standardization folded in), through both scorers', async () => {
    const paragraphs = await tinyStoriesParagraphs(60);
    const forced = await teacherForcePacks(demo.edgePack, demo.cloudPack, paragraphs);
    const data = { features: forced.hidden, labels: citerLabels(forced), rows: forced.count };
    const options = { inputSize: 64, hiddenUnits: 16, seed: 7, maxEpochs: 3 };
    const { weights } = trainMlp(data, data, options);
    // Deterministic for a seed.
    expect(trainMlp(data, data, options).weights).toEqual(weights);
    expect(weights.mean.some((m) => Math.abs(m) > 0.01)).toBe(true); // folding has something to do

    const out = join(work, 'small-router');
    await writeRouterPack(out, { weights, meta: { hidden_size: 64, slm: 'x', default_threshold: 0.5 }, source: {} });
    const expected = predict(weights, heldOut.hidden, heldOut.count);
    const batch = await scoreWithRouterPack(out, { count: heldOut.count, hidden: heldOut.hidden });
    let worst = 0;
    for (let i = 0; i < heldOut.count; i++) worst = Math.max(worst, Math.abs(batch[i]! - expected[i]!));
    expect(worst).toBeLessThan(1e-5);

    const router = await OnnxRouter.load(out);
    try {
      for (const i of [0, 1, 100, heldOut.count - 1]) {
        const score = await router.score(heldOut.hidden.slice(i * 64, (i + 1) * 64));
        expect(Math.abs(score - expected[i]!)).toBeLessThan(1e-5);
      }
    } finally {
      await router.release();
    }
  }, 30_000);

  test('a router that reads logit and repetition features: router.onnx, the batch scorer and the runtime agree with the MLP', async () => {
    const paragraphs = await tinyStoriesParagraphs(30);
    const forced = await teacherForcePacks(demo.edgePack, demo.cloudPack, paragraphs);
    const features = ['hidden', 'logit_stats', 'repetition'] as const;
    const x = routerInputs(forced, features);
    expect(x.width).toBe(72);
    const data = { features: x.features, labels: divergenceLabels(forced), rows: forced.count };
    const { weights } = trainMlp(data, data, { inputSize: 72, hiddenUnits: 8, seed: 1, maxEpochs: 2 });
    const out = join(work, 'feature-router');
    await writeRouterPack(out, { weights, meta: { hidden_size: 64, slm: 'x', default_threshold: 0.5, features: [...features] }, source: {} });
    const expected = predict(weights, x.features, forced.count);
    const batch = await scoreWithRouterPack(out, forced);
    let worst = 0;
    for (let i = 0; i < forced.count; i++) worst = Math.max(worst, Math.abs(batch[i]! - expected[i]!));
    expect(worst).toBeLessThan(1e-5);

    // The runtime computes the features itself from the logits and the context: the same scores.
    const edge = await DecoderModel.load(loadModelPack(demo.edgePack));
    const router = await OnnxRouter.load(out);
    try {
      expect(router.info.features).toEqual([...features]);
      const tokenizer = await TextTokenizer.fromPack(demo.edgePack);
      const ids = tokenizer.encode(paragraphs[0]!, { addBos: true, parseSpecialTokens: false });
      const sequence = edge.newSequence();
      try {
        const { allHidden, allLogits } = await sequence.append(ids, { allPositions: true });
        for (const i of [0, 5, 20]) {
          const score = await router.score(allHidden!.slice(i * 64, (i + 1) * 64), allLogits!.slice(i * 512, (i + 1) * 512), ids.slice(0, i + 1));
          expect(Math.abs(score - expected[i]!)).toBeLessThan(1e-5);
        }
      } finally {
        sequence.dispose();
      }
      await expect(router.score(forced.hidden.slice(0, 64))).rejects.toThrow("reads the edge model's logits; the caller gave none");
    } finally {
      await router.release();
      await edge.release();
    }
  }, 30_000);

  test("a pack whose router.json features do not match router.onnx's inputs is refused", async () => {
    const out = join(work, 'mismatched-router');
    await writeRouterPack(out, { weights: initialWeights(64, 4, 0), meta: { hidden_size: 64, slm: 'x', default_threshold: 0.5 }, source: {} });
    const meta = readJsonFile(join(out, 'router.json')) as RouterJson;
    writeFileSync(join(out, 'router.json'), JSON.stringify({ ...meta, features: ['hidden', 'logit_stats'] }));
    await expect(OnnxRouter.load(out)).rejects.toThrow("router.json's features (hidden, logit_stats) do not match router.onnx's inputs (hidden_states)");
  });
});
