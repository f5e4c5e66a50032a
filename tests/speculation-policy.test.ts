import { describe, expect, test } from 'bun:test';
import { DEFAULT_PRIOR_HIT_RATE, SpeculationPolicy } from '../src/edge/loop/speculation/speculation-policy.ts';

/** A policy whose running figures are exactly the given ones (weight 1: each observation replaces the estimate). */
function measured(hitRate: number, roundTripMs: number, stepMs: number): SpeculationPolicy {
  const policy = new SpeculationPolicy({ priorHitRate: hitRate, weight: 1 });
  policy.observeRoundTrip(roundTripMs);
  policy.observeStep(stepMs);
  return policy;
}

describe('speculate auto: the decision on given figures', () => {
  test('it waits until both the round trip and the edge step are measured', () => {
    const policy = new SpeculationPolicy({ priorHitRate: 1 });
    expect(policy.decide(16)).toEqual({ speculate: false, figures: { hitRate: 1, roundTripMs: null, stepMs: null, stepsAhead: 0, savingMs: 0, costMs: 0 } });
    policy.observeRoundTrip(40);
    expect(policy.decide(16).speculate).toBe(false);
    policy.observeStep(4);
    expect(policy.decide(16).speculate).toBe(true);
  });

  test('saving p·n·step against cost (1 − p)·(n·step + step/2), n = min(depth, round trip / step)', () => {
    // 40 ms round trip, 4 ms steps: 10 steps ahead. Break-even p = 10.5 / 20.5 ≈ 0.512.
    expect(measured(0.5, 40, 4).decide(16)).toEqual({
      speculate: false,
      figures: { hitRate: 0.5, roundTripMs: 40, stepMs: 4, stepsAhead: 10, savingMs: 20, costMs: 21 },
    });
    expect(measured(0.625, 40, 4).decide(16)).toEqual({
      speculate: true,
      figures: { hitRate: 0.625, roundTripMs: 40, stepMs: 4, stepsAhead: 10, savingMs: 25, costMs: 15.75 },
    });
    // The depth bounds the steps: 4 steps of 4 ms.
    expect(measured(0.625, 40, 4).decide(4).figures).toEqual({ hitRate: 0.625, roundTripMs: 40, stepMs: 4, stepsAhead: 4, savingMs: 10, costMs: 6.75 });
    // A round trip shorter than one edge step hides nothing worth a pass, whatever the hit rate.
    expect(measured(1, 2, 4).decide(16)).toEqual({
      speculate: false,
      figures: { hitRate: 1, roundTripMs: 2, stepMs: 4, stepsAhead: 0.5, savingMs: 2, costMs: 0 },
    });
    expect(measured(0, 400, 4).decide(16).speculate).toBe(false);
    expect(measured(1, 400, 4).decide(16).figures.savingMs).toBe(64);
  });

  test('running estimates: each observation moves the figure by the weight', () => {
    const policy = new SpeculationPolicy({ priorHitRate: 0.5, weight: 0.25 });
    policy.observeRoundTrip(40);
    policy.observeRoundTrip(80);
    policy.observeStep(4);
    policy.observeStep(8);
    policy.observeGuess(true);
    expect(policy.decide(16).figures).toEqual({ hitRate: 0.625, roundTripMs: 50, stepMs: 5, stepsAhead: 10, savingMs: 31.25, costMs: 19.6875 });
    policy.observeGuess(false);
    expect(policy.decide(16).figures.hitRate).toBe(0.46875);
  });

  test('the default prior waits; hits turn it on, misses off again, hits on again', () => {
    expect(DEFAULT_PRIOR_HIT_RATE).toBe(0.3);
    const policy = new SpeculationPolicy();
    policy.observeRoundTrip(40);
    policy.observeStep(4);
    const decisions: boolean[] = [];
    for (const hit of [true, true, true, false, false, false, true, true, true]) {
      policy.observeGuess(hit);
      decisions.push(policy.decide(16).speculate);
    }
    // p: 0.44, 0.552, 0.6416, 0.513, 0.411, 0.328, 0.463, 0.570, 0.656 against the break-even 0.512.
    expect(decisions).toEqual([false, true, true, true, false, false, false, true, true]);
  });
});
