import { describe, expect, test } from 'bun:test';
import { RandomRouter, TopProbabilityRouter } from '../src/tools/lab/baseline-routers.ts';
import { lowestSelection, matchRoutedRatio, quantileThreshold, randomSelection } from '../src/tools/lab/ratio-matching.ts';
import { MAX_SCORE } from '../src/tools/router/mlp.ts';

const sum = (a: Uint8Array) => a.reduce((s, v) => s + v, 0);

describe('equal routed share over fixed positions', () => {
  test('a random selection has exactly k positions, is seeded, and grows by subsets', () => {
    const a = randomSelection(100, 30, 7);
    expect(sum(a)).toBe(30);
    expect(randomSelection(100, 30, 7)).toEqual(a);
    expect(randomSelection(100, 30, 8)).not.toEqual(a);
    const b = randomSelection(100, 45, 7);
    for (let i = 0; i < 100; i++) if (a[i]) expect(b[i]).toBe(1);
    expect(sum(randomSelection(5, 0, 1))).toBe(0);
    expect(sum(randomSelection(5, 5, 1))).toBe(5);
  });

  test('the lowest-score selection: ties go to earlier positions; the threshold separates', () => {
    const scores = [0.9, 0.1, 0.5, 0.1, 0.7];
    expect(lowestSelection(scores, 0)).toEqual({ mask: Uint8Array.from([0, 0, 0, 0, 0]), threshold: 0 });
    expect(lowestSelection(scores, 1)).toEqual({ mask: Uint8Array.from([0, 1, 0, 0, 0]), threshold: 0.1 });
    expect(lowestSelection(scores, 3)).toEqual({ mask: Uint8Array.from([0, 1, 1, 1, 0]), threshold: 0.6 });
    expect(lowestSelection(scores, 5).threshold).toBe(1);
    expect(quantileThreshold([0.2, 0.4, 0.6, 0.8], 0.5)).toBeCloseTo(0.5, 12);
  });
});

describe('matching the routed share by threshold search', () => {
  test('finds the threshold of a monotone share within the tolerance and counts its runs', async () => {
    const calls: number[] = [];
    const run = async (t: number) => {
      calls.push(t);
      return { routedRatio: t * t };
    };
    const m = await matchRoutedRatio(run, 0.25, { guess: 0.9, maxRuns: 20, tolerance: 0.001 });
    expect(Math.abs(m.result.routedRatio - 0.25)).toBeLessThanOrEqual(0.001);
    expect(m.runs).toBe(calls.length);
    expect(calls[0]).toBe(0.9);
  });

  test('a close first guess stays close: the next threshold is interpolated between the runs on either side', async () => {
    const calls: number[] = [];
    const linear = async (t: number) => {
      calls.push(t);
      return { routedRatio: t };
    };
    const m = await matchRoutedRatio(linear, 0.3, { guess: 0.28, maxRuns: 6, tolerance: 0.001 });
    // Bisection would have tried 0.64 next; between (0.28, 0.28) and (1, 1) the share 0.3 lies at 0.3.
    expect(calls).toHaveLength(2);
    expect(calls[1]).toBeCloseTo(0.3, 12);
    expect(m.threshold).toBeCloseTo(0.3, 12);
    // A curved share does not pin the search to one end (Illinois): t² from 0.9 to 0.25 in a handful of runs.
    let curved = 0;
    const square = async (t: number) => {
      curved++;
      return { routedRatio: t * t };
    };
    const c = await matchRoutedRatio(square, 0.25, { guess: 0.9, maxRuns: 50, tolerance: 1e-6 });
    expect(Math.abs(c.result.routedRatio - 0.25)).toBeLessThanOrEqual(1e-6);
    expect(curved).toBeLessThanOrEqual(10);
  });

  test("a run already made below the target (the share before's) is the bracket's lower end from the start", async () => {
    const search = async (below?: { threshold: number; routedRatio: number }) => {
      const calls: number[] = [];
      const square = async (t: number) => {
        calls.push(t);
        return { routedRatio: t * t };
      };
      const m = await matchRoutedRatio(square, 0.25, { guess: 0.9, maxRuns: 50, tolerance: 1e-4, ...(below ? { below } : {}) });
      expect(Math.abs(m.result.routedRatio - 0.25)).toBeLessThanOrEqual(1e-4);
      return calls;
    };
    const from0 = await search();
    const from04 = await search({ threshold: 0.4, routedRatio: 0.16 });
    // Between (0.4, 0.16) and (0.9, 0.81) the second run is at 0.4 + 0.5 · 0.09 / 0.65; from 0 it is at 0.9 · 0.25 / 0.81.
    expect(from04[1]).toBeCloseTo(0.4 + (0.5 * 0.09) / 0.65, 12);
    expect(from0[1]).toBeCloseTo((0.9 * 0.25) / 0.81, 12);
    expect(Math.min(...from04)).toBeGreaterThan(0.4);
    expect(from04.length).toBeLessThan(from0.length);
    // A run at or above the target is no lower end: the search is the one from 0.
    expect(await search({ threshold: 0.6, routedRatio: 0.36 })).toEqual(from0);
  });

  test('returns the closest run seen when the budget ends first; the ends need one run', async () => {
    const steps = async (t: number) => ({ routedRatio: t < 0.5 ? 0 : 1 });
    const m = await matchRoutedRatio(steps, 0.3, { guess: 0.4, maxRuns: 3, tolerance: 0 });
    expect(m.runs).toBe(3);
    expect(m.result.routedRatio).toBe(0);
    expect(await matchRoutedRatio(steps, 0, { guess: 0.4, maxRuns: 9, tolerance: 0 })).toEqual({ threshold: 0, result: { routedRatio: 0 }, runs: 1 });
    expect(await matchRoutedRatio(steps, 1, { guess: 0.4, maxRuns: 9, tolerance: 0 })).toEqual({ threshold: 1, result: { routedRatio: 1 }, runs: 1 });
  });
});

describe('baseline routers', () => {
  test('random scores are seeded and in [0, 1); the top-1 score is capped below 1', async () => {
    const a = new RandomRouter(3);
    const b = new RandomRouter(3);
    const empty = new Float32Array(0);
    for (let i = 0; i < 5; i++) {
      const s = await a.score();
      expect(s).toBe(await b.score());
      expect(s >= 0 && s < 1).toBe(true);
    }
    const top1 = new TopProbabilityRouter();
    expect(await top1.score(empty, Float32Array.from([0, 0, 0, 0]))).toBeCloseTo(0.25, 6);
    expect(await top1.score(empty, Float32Array.from([1000, 0]))).toBe(MAX_SCORE);
  });
});
