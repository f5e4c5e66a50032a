/**
 * The eval's share-budget and span tables on hand-made positions: windows counted exactly, the ShareCut's
 * band over every full window, fixed τ matched to the budget's realized share, and spans that route the
 * same share of cloud tokens in fewer round trips.
 */
import { describe, expect, test } from 'bun:test';
import { ShareCut } from '../src/edge/routing/share-cut.ts';
import { driveShareCut, recoveredFraction, scopeRanges, shareBudgetRows, windowShares, type BudgetOutcomes } from '../src/tools/eval/share-budget-table.ts';
import { spanRouting, spanRows } from '../src/tools/eval/span-table.ts';

/** Deterministic scores in [0, 1) that look unordered (a multiplicative sequence mod a prime). */
function scrambled(n: number): Float64Array {
  return Float64Array.from({ length: n }, (_, i) => ((i * 7919 + 13) % 1009) / 1009);
}

/** `n` positions in documents of the given lengths, in turn; the edge right on even positions, the cloud on all but every 5th. */
function outcomes(lengths: number[]): BudgetOutcomes {
  const paragraph = lengths.flatMap((len, p) => Array<number>(len).fill(p));
  const n = paragraph.length;
  return {
    count: n,
    edgeCorrect: Uint8Array.from({ length: n }, (_, i) => (i % 2 === 0 ? 1 : 0)),
    cloudCorrect: Uint8Array.from({ length: n }, (_, i) => (i % 5 === 0 ? 0 : 1)),
    paragraph: Int32Array.from(paragraph),
  };
}

describe('windows', () => {
  test('full windows slide one token at a time; growing windows run from the warm-up to the window', () => {
    const routed = Uint8Array.from([1, 0, 0, 1, 1, 0, 1]);
    // window 4, warm-up 2: tokens 2 and 3 grow (1/2, 1/3), then [1,0,0,1] [0,0,1,1] [0,1,1,0] [1,1,0,1].
    expect(windowShares(routed, 4, 2)).toEqual({ early: [1 / 2, 1 / 3], full: [2 / 4, 2 / 4, 2 / 4, 3 / 4] });
    expect(windowShares(routed.subarray(0, 3), 4, 2)).toEqual({ early: [1 / 2, 1 / 3], full: [] });
    expect(windowShares(routed, 7, 7)).toEqual({ early: [], full: [4 / 7] });
  });

  test('scopes: one per document (consecutive positions of one paragraph), or the whole stream', () => {
    const paragraph = [0, 0, 0, 4, 4, 7];
    expect(scopeRanges(paragraph, 'document')).toEqual([
      [0, 3],
      [3, 5],
      [5, 6],
    ]);
    expect(scopeRanges(paragraph, 'stream')).toEqual([[0, 6]]);
    expect(scopeRanges([], 'document')).toEqual([]);
    expect(scopeRanges([], 'stream')).toEqual([]);
  });
});

describe('the share budget over positions in order', () => {
  test('drives the edge ShareCut exactly: a fresh cut per scope seeded with the 200 scores before it, decisions as decide() gives them', () => {
    const scores = scrambled(450);
    const { routed, guarded } = driveShareCut(
      scores,
      [
        [0, 250],
        [250, 450],
      ],
      0.1,
    );
    const expected: number[] = [];
    let expectedGuarded = 0;
    for (const [start, end] of [
      [0, 250],
      [250, 450],
    ] as const) {
      const cut = new ShareCut(0.1, {}, Array.from(scores).slice(Math.max(0, start - 200), start));
      for (let i = start; i < end; i++) {
        const d = cut.decide(scores[i]!);
        cut.record(scores[i]!, d.routed, d.by);
        expected.push(d.routed ? 1 : 0);
      }
      expectedGuarded += cut.guarded;
    }
    expect(Array.from(routed)).toEqual(expected);
    expect(guarded).toBe(expectedGuarded);
  });

  test('rows per budget and scope; every full window in share ± 0.02; fixed τ at the realized share routes as many positions', () => {
    const o = outcomes([300, 150, 450]);
    const scores = scrambled(o.count);
    const rows = shareBudgetRows(o, scores, [0.1, 0.3]);
    expect(rows.map((r) => [r.share, r.scope])).toEqual([
      [0.1, 'document'],
      [0.1, 'stream'],
      [0.3, 'document'],
      [0.3, 'stream'],
    ]);
    for (const r of rows) {
      // The band's guard promises it for every full window.
      expect(r.full_window_min!).toBeGreaterThanOrEqual(r.share - 0.02 - 1e-12);
      expect(r.full_window_max!).toBeLessThanOrEqual(r.share + 0.02 + 1e-12);
      expect(r.guarded).toBeGreaterThanOrEqual(0);
      expect(r.realized_share).toBe(r.routed / o.count);
      // Distinct scores: τ halfway between the k-th and (k+1)-th lowest routes exactly k.
      expect(Math.abs(r.tau_share - r.realized_share) * o.count).toBeLessThanOrEqual(1);
      expect(r.tau_share).toBe(r.realized_share);
      expect(r.tau_recovered).toBe(
        recoveredFraction(
          o,
          Uint8Array.from(scores, (s) => (s < r.tau ? 1 : 0)),
        ),
      );
    }
    // Documents of 300 and 450 tokens have 101 and 251 full windows; the 150-token one none. The stream: 701.
    expect(rows[0]!.full_windows).toBe(101 + 251);
    expect(rows[0]!.early_windows).toBe(150 + 101 + 150);
    expect(rows[1]!.full_windows).toBe(701);
    expect(rows[1]!.early_windows).toBe(150);
  });

  test('a budget without positions reports no windows rather than ±Infinity', () => {
    const [row] = shareBudgetRows(outcomes([]), [], [0.1]);
    expect(row).toMatchObject({ realized_share: 0, routed: 0, full_windows: 0, full_window_min: null, full_window_max: null, early_window_min: null });
  });

  test('the recovered fraction: the edge alone is 0, the cloud alone 1', () => {
    const o = outcomes([10]);
    expect(recoveredFraction(o, new Uint8Array(10))).toBe(0);
    expect(recoveredFraction(o, new Uint8Array(10).fill(1))).toBe(1);
  });
});

describe('route spans', () => {
  test('a score below τ routes its position and the next span − 1 of its document, in one step', () => {
    const scores = [0.1, 0.9, 0.1, 0.1, 0.9, 0.1, 0.1];
    const paragraph = [0, 0, 0, 0, 0, 1, 1];
    expect(spanRouting(scores, paragraph, 0.5, 1)).toEqual({ routed: Uint8Array.from([1, 0, 1, 1, 0, 1, 1]), steps: 5 });
    // Span 2: position 0 takes 1; 2 takes 3; 5 takes 6.
    expect(spanRouting(scores, paragraph, 0.5, 2)).toEqual({ routed: Uint8Array.from([1, 1, 1, 1, 0, 1, 1]), steps: 3 });
    // Span 4 stops at the document's end (position 4), and starts again in the next.
    expect(spanRouting(scores, paragraph, 0.5, 4)).toEqual({ routed: Uint8Array.from([1, 1, 1, 1, 0, 1, 1]), steps: 2 });
  });

  test('rows per share and span reach the target share of cloud tokens in fewer round trips as the span grows', () => {
    const o = outcomes([400, 400]);
    const rows = spanRows(o, scrambled(o.count), [0.2]);
    expect(rows.map((r) => r.span)).toEqual([1, 2, 4]);
    for (const r of rows) expect(Math.abs(r.cloud_share - 0.2)).toBeLessThanOrEqual(4 / o.count);
    expect(rows[1]!.round_trips_per_100).toBeLessThan(rows[0]!.round_trips_per_100);
    expect(rows[2]!.round_trips_per_100).toBeLessThan(rows[1]!.round_trips_per_100);
    expect(rows[0]!.round_trips_per_100).toBeCloseTo(100 * rows[0]!.cloud_share, 10);
  });
});
