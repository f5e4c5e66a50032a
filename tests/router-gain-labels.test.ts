import { describe, expect, test } from 'bun:test';
import { logLoss } from '../src/tools/router/classifier-metrics.ts';
import {
  gainTarget,
  labelsFor,
  cloudGainTargets,
  cloudNllTargets,
  loopBreaks,
  loopEntries,
  mixedGainTargets,
  nllGainTarget,
  textGainTargets,
} from '../src/tools/router/labels.ts';
import { predict } from '../src/tools/router/mlp.ts';
import { LOOP_WINDOW, repeatsFourGramAt, type TeacherForced } from '../src/tools/lab/forced-records.ts';
import { trainMlp } from '../src/tools/router/train-mlp.ts';
import { softRuleThreshold } from '../src/tools/router/train-router.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';

/** Four records: edge right only, cloud right only, both right, both wrong. */
const forced = {
  count: 4,
  edgeCorrect: Uint8Array.of(1, 0, 1, 0),
  cloudCorrect: Uint8Array.of(0, 1, 1, 0),
  cloudProbOfEdgeTop1: Float32Array.of(0.5, 0.1, 0.25, 0.7),
  cloudTopProb: Float32Array.of(0.5, 0.9, 0.75, 0.7),
} as unknown as TeacherForced;

describe('gain labels', () => {
  test('the target is (1 − gain) / 2: routing a position the cloud gets right and the edge wrong gains 1', () => {
    expect(gainTarget(0, 1)).toBe(0); // only the cloud right: surely route
    expect(gainTarget(1, 0)).toBe(1); // only the edge right: surely keep
    expect(gainTarget(1, 1)).toBe(0.5); // routing changes nothing
    expect(gainTarget(0.1, 0.9)).toBeCloseTo(0.1, 12); // the cloud expects to gain 0.8 in agreement
  });

  test('gain: correctness against the text decides; cloud-gain: the probabilities of the cloud do', () => {
    expect([...textGainTargets(forced)]).toEqual([1, 0, 0.5, 0.5]);
    const rollout = cloudGainTargets(forced);
    expect(rollout[0]).toBe(0.5); // same token: nothing to gain
    expect(rollout[1]).toBeCloseTo(0.1, 6);
    expect(rollout[2]).toBeCloseTo(0.25, 6);
    expect(rollout[3]).toBe(0.5);
  });

  test("binary labels: CITER's for gain, divergence's for cloud-gain; the hard rules train on their labels", () => {
    const gain = labelsFor('gain', forced);
    expect([...gain.labels]).toEqual([1, 0, 1, 1]);
    expect([...gain.targets]).toEqual([1, 0, 0.5, 0.5]);
    const cloudGain = labelsFor('cloud-gain', forced);
    expect([...cloudGain.labels]).toEqual([1, 0, 0, 1]);
    expect(cloudGain.targets[1]).toBeCloseTo(0.1, 6);
    const mixed = labelsFor('mixed-gain', forced);
    expect([...mixed.labels]).toEqual([...gain.labels]);
    expect([...mixed.targets].map((t) => Math.round(t * 1e6) / 1e6)).toEqual([0.75, 0.05, 0.375, 0.5]);
    expect([...mixedGainTargets(forced)]).toEqual([...mixed.targets]);
    const divergence = labelsFor('divergence', forced);
    expect([...divergence.targets]).toEqual([...divergence.labels]);
  });
});

describe('cloud-nll labels', () => {
  test('the target is 1 / (2 (1 + g)) for the NLL the route takes off: 0.5 where the tokens agree', () => {
    expect(nllGainTarget(0.5, 0.5)).toBe(0.5);
    expect(nllGainTarget(0.7, 0.7)).toBe(0.5);
    // g = ln(0.9 / 0.1) = ln 9
    expect(nllGainTarget(0.1, 0.9)).toBeCloseTo(1 / (2 * (1 + Math.log(9))), 12);
    // A token 10,000 times less likely than the cloud's is further from keep than one 100 times less likely.
    expect(nllGainTarget(1e-6, 0.01)).toBeCloseTo(1 / (2 * (1 + Math.log(1e4))), 12);
    expect(nllGainTarget(1e-6, 0.01)).toBeLessThan(nllGainTarget(1e-4, 0.01));
    // A float32 zero is floored, not infinite.
    expect(nllGainTarget(0, 1)).toBeCloseTo(1 / (2 * (1 + Math.log(1e30))), 12);
  });

  test("rollout records: divergence's binary labels, NLL-gain targets", () => {
    const nll = labelsFor('cloud-nll', forced);
    expect([...nll.labels]).toEqual([1, 0, 0, 1]);
    expect([...nll.targets]).toEqual([...cloudNllTargets(forced)]);
    expect(nll.targets[0]).toBe(0.5);
    expect(nll.targets[1]).toBeCloseTo(1 / (2 * (1 + Math.log(9))), 6);
    expect(nll.targets[2]).toBeCloseTo(1 / (2 * (1 + Math.log(3))), 6);
    expect(nll.targets[3]).toBe(0.5);
  });
});

describe('loop-nll labels', () => {
  // A rollout: prompt 1 2, then 3 4 5 3 4 5 3 4 written by the edge and 9 by a route; records from the prompt's last position (1) on.
  const ids = [1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 9];
  // What the edge proposed after each position 1..9 (at 9 the route wrote the cloud's 9 instead), and the cloud's top-1 there.
  const proposed = [3, 4, 5, 3, 4, 5, 3, 4, 5];
  const cloudTop = [3, 4, 9, 3, 4, 5, 3, 9, 9];
  const flags = proposed.map((next, k) => (repeatsFourGramAt(ids, k + 1, next) ? 1 : 0));

  test('the edge completes a 4-gram seen earlier in the trajectory: the loop takes one more step', () => {
    // 3 4 5 3 first repeats at position 7, then 4 5 3 4 and 5 3 4 5.
    expect(flags).toEqual([0, 0, 0, 0, 0, 0, 1, 1, 1]);
    // The prompt counts: 1 2 3 4 proposed again after a later 1 2 3.
    expect(repeatsFourGramAt([1, 2, 3, 4, 9, 1, 2, 3], 7, 4)).toBe(true);
    expect(repeatsFourGramAt([1, 2, 3, 4, 9, 1, 2, 3], 7, 5)).toBe(false);
    // Only the last LOOP_WINDOW ids are read.
    const far = [1, 2, 3, 4, ...Array.from({ length: LOOP_WINDOW }, (_, i) => 100 + i), 1, 2, 3];
    expect(repeatsFourGramAt(far, far.length - 1, 4)).toBe(false);
  });

  test("loop steps where the cloud would write another token are routed (target 0); elsewhere cloud-nll's targets", () => {
    const agree = 0.6;
    // Where the two top-1s differ the cloud finds the edge's 3 times less likely than its own.
    const records = {
      count: 9,
      proposed: Int32Array.from(proposed),
      cloudTop: Int32Array.from(cloudTop),
      repeatsFourGram: Uint8Array.from(flags),
      cloudTopProb: Float32Array.from(proposed, () => agree),
      cloudProbOfEdgeTop1: Float32Array.from(proposed, (p, k) => (p === cloudTop[k] ? agree : 0.2)),
    } as unknown as TeacherForced;
    // Position 7 loops but the cloud agrees (a route changes nothing); at 8 and 9 it loops and the cloud differs.
    expect([...loopBreaks(records)]).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 1]);
    const loop = labelsFor('loop-nll', records);
    const nll = 1 / (2 * (1 + Math.log(3)));
    const rounded = (values: Iterable<number>) => [...values].map((t) => Math.round(t * 1e6) / 1e6);
    expect(rounded(loop.targets)).toEqual(rounded([0.5, 0.5, nll, 0.5, 0.5, 0.5, 0.5, 0, 0]));
    expect([...loop.labels]).toEqual([1, 1, 0, 1, 1, 1, 1, 0, 0]);
    // The same records under cloud-nll: the loop steps keep its soft target.
    expect(labelsFor('cloud-nll', records).targets[8]).toBeCloseTo(nll, 6);
  });
});

describe('loop-guard-nll and loop-neutral-nll labels', () => {
  // A trajectory looping on 7 8 9: after its 7th id the edge would write 8 (the loop's next step); after its 8th it
  // proposes 5 where the cloud would write 9, completing 9 7 8 9 seen before: a route there would take the loop on.
  const ids = [7, 8, 9, 7, 8, 9, 7, 8];
  const positions = [6, 6, 7];
  const proposed = [8, 8, 5];
  const cloudTop = [8, 5, 9];
  const records = {
    count: 3,
    proposed: Int32Array.from(proposed),
    cloudTop: Int32Array.from(cloudTop),
    repeatsFourGram: Uint8Array.from(positions, (p, k) => (repeatsFourGramAt(ids, p, proposed[k]!) ? 1 : 0)),
    cloudRepeatsFourGram: Uint8Array.from(positions, (p, k) => (repeatsFourGramAt(ids, p, cloudTop[k]!) ? 1 : 0)),
    cloudTopProb: Float32Array.of(0.6, 0.6, 0.6),
    cloudProbOfEdgeTop1: Float32Array.of(0.6, 0.2, 0.2),
  } as unknown as TeacherForced;

  test('where a route would take a loop one step further and the edge would not, the position is kept (target 1); loop breaks still route', () => {
    expect([...records.repeatsFourGram]).toEqual([1, 1, 0]);
    expect([...records.cloudRepeatsFourGram]).toEqual([1, 0, 1]);
    expect([...loopEntries(records)]).toEqual([0, 0, 1]);
    const guard = labelsFor('loop-guard-nll', records);
    // Both loop and agree: nothing to change (0.5); the edge loops and the cloud breaks it: route (0).
    expect([...guard.targets]).toEqual([0.5, 0, 1]);
    expect([...guard.labels]).toEqual([1, 0, 1]);
    // loop-averse-nll counts a route into the loop as a loss, loop-neutral-nll as gaining nothing.
    expect([...labelsFor('loop-averse-nll', records).targets]).toEqual([0.5, 0, 0.75]);
    const neutral = labelsFor('loop-neutral-nll', records);
    expect([...neutral.targets]).toEqual([0.5, 0, 0.5]);
    expect([...neutral.labels]).toEqual([1, 0, 1]);
    // loop-nll routes the entry by cloud-nll's rule (a 3 to 1 preference).
    const loop = labelsFor('loop-nll', records);
    expect(loop.targets[2]).toBeCloseTo(1 / (2 * (1 + Math.log(3))), 6);
    expect(loop.labels[2]).toBe(0);
  });
});

describe('training on soft targets', () => {
  test("a soft rule's default threshold routes as many validation positions as its binary labels mark for routing", () => {
    const scores = Float32Array.of(0.3, 0.1, 0.45, 0.2, 0.6, 0.5, 0.35, 0.05);
    // Three of eight labels say route: the threshold falls between the third and fourth lowest scores.
    const labels = Uint8Array.of(1, 0, 1, 1, 1, 0, 1, 0);
    expect(softRuleThreshold(scores, labels)).toBe(0.25);
    expect(scores.filter((v) => v < softRuleThreshold(scores, labels)).length).toBe(3);
    expect(softRuleThreshold(scores, new Uint8Array(8).fill(1))).toBe(0); // nothing to route
  });

  test('log loss of a soft target is smallest at the target', () => {
    expect(logLoss([0.3], [0.3])).toBeLessThan(logLoss([0.2], [0.3]));
    expect(logLoss([0.3], [0.3])).toBeLessThan(logLoss([0.4], [0.3]));
    expect(logLoss([0.9], [1])).toBeCloseTo(-Math.log(0.9), 12);
  });

  test('the MLP learns the expected target where the same input carries different labels', () => {
    // One feature, two groups: x = −1 has targets 0.2 and 0.4 (mean 0.3), x = +1 has targets 0.9 and 0.7 (mean 0.8).
    const random = seededRandom(3);
    const rows = 4000;
    const features = Float32Array.from({ length: rows }, (_, r) => (r % 2 === 0 ? -1 : 1) + (random() - 0.5) * 0.01);
    const targets = Float32Array.from({ length: rows }, (_, r) => (r % 2 === 0 ? (r % 4 === 0 ? 0.2 : 0.4) : r % 4 === 1 ? 0.9 : 0.7));
    const labels = Uint8Array.from(targets, (t) => (t >= 0.5 ? 1 : 0));
    const data = { features, labels, targets, rows };
    const { weights } = trainMlp(data, data, { inputSize: 1, hiddenUnits: 4, seed: 1, maxEpochs: 40, learningRate: 0.01 });
    const [low, high] = predict(weights, Float32Array.of(-1, 1), 2);
    expect(low).toBeCloseTo(0.3, 1);
    expect(high).toBeCloseTo(0.8, 1);
  });
});
