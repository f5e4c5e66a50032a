/**
 * A share budget under teacher forcing: the edge's ShareCut (src/edge/routing/share-cut.ts) driven over the
 * held-out positions in order with the real router's scores, against fixed τ at the same overall share.
 *
 * Document boundaries: a generation holds its own ShareCut, so each document (paragraph) gets a fresh one,
 * as a generation would, seeded as the edge seeds it with the box's latest scores (here the 200 positions
 * before the document: the documents before it, read in order); its windows never reach across documents. A second row per budget drives one
 * ShareCut over every position in order (`stream`), as if the documents were one long generation: there
 * the 200-token windows are many, where most documents are shorter than a window.
 *
 * Windows: at every token t ≥ 50 of a document (or of the stream), the share routed among the last
 * min(t, 200) tokens. Full windows (t ≥ 200) are what the budget's band promises (share ± 0.02); the
 * growing ones before (50 ≤ t < 200) show how fast the cut settles, reported apart.
 *
 * Quality: the recovered fraction of the edge→cloud accuracy gap (share-table.ts) of the positions the
 * budget routed, beside fixed τ at the quantile of the same scores that routes as many positions.
 *
 * @example
 * const rows = shareBudgetRows({ count, edgeCorrect, cloudCorrect, paragraph }, scores, [0.1]);
 * rows[0].budget_recovered - rows[0].tau_recovered; // what the moving cut costs, as a fraction of the gap
 */
import { ShareCut } from '../../edge/routing/share-cut.ts';
import { lowestSelection } from '../lab/ratio-matching.ts';

/** Tokens seen before a window counts (the first 50: the cut has too few scores to read a share from). */
export const WINDOW_WARMUP = 50;

export type BudgetScope = 'document' | 'stream';

export interface ShareBudgetRow {
  /** The budget: the share the ShareCut holds. */
  share: number;
  scope: BudgetScope;
  /** Routed positions / positions, over all of them. */
  realized_share: number;
  routed: number;
  /** Full 200-token windows counted, and the lowest and highest share among them (null without one). */
  full_windows: number;
  full_window_min: number | null;
  full_window_max: number | null;
  /** Growing windows (tokens 50 to 199 of a scope): their count, lowest and highest share. */
  early_windows: number;
  early_window_min: number | null;
  early_window_max: number | null;
  /** Positions the band's guard decided, against the quantile cut. */
  guarded: number;
  /** Recovered fraction of the gap of the budget's routed positions. */
  budget_recovered: number;
  /** Fixed τ routing as many positions: τ, the share it routes, and its recovered fraction. */
  tau: number;
  tau_share: number;
  tau_recovered: number;
}

export interface BudgetOutcomes {
  count: number;
  edgeCorrect: ArrayLike<number>;
  cloudCorrect: ArrayLike<number>;
  /** The document of each position; positions of a document are consecutive. */
  paragraph: ArrayLike<number>;
}

interface WindowRange {
  count: number;
  min: number;
  max: number;
}

const emptyRange = (): WindowRange => ({ count: 0, min: Number.POSITIVE_INFINITY, max: Number.NEGATIVE_INFINITY });

function widen(range: WindowRange, value: number): void {
  range.count++;
  range.min = Math.min(range.min, value);
  range.max = Math.max(range.max, value);
}

/** [start, end) of each scope's positions: one per document, or one for all. */
export function scopeRanges(paragraph: ArrayLike<number>, scope: BudgetScope): [number, number][] {
  const n = paragraph.length;
  if (scope === 'stream') return n ? [[0, n]] : [];
  const ranges: [number, number][] = [];
  for (let start = 0, i = 1; i <= n; i++) {
    if (i === n || paragraph[i] !== paragraph[start]) {
      ranges.push([start, i]);
      start = i;
    }
  }
  return ranges;
}

/**
 * The windows of one routed sequence: full `window`-token windows, and the growing ones from `warmup` tokens on.
 *
 * @example
 * windowShares(Uint8Array.from([1, 0, 0, 1]), 2, 1); // full: [0.5, 0, 0.5], early: [1]
 */
export function windowShares(routed: ArrayLike<number>, window: number, warmup = WINDOW_WARMUP): { full: number[]; early: number[] } {
  const full: number[] = [];
  const early: number[] = [];
  let inWindow = 0;
  for (let t = 1; t <= routed.length; t++) {
    inWindow += routed[t - 1]!;
    if (t > window) inWindow -= routed[t - 1 - window]!;
    if (t >= window) full.push(inWindow / window);
    else if (t >= warmup) early.push(inWindow / t);
  }
  return { full, early };
}

/**
 * The ShareCut's decisions over `scores` in order, a fresh cut per scope range seeded with the scores before
 * the range (as RoutingCut seeds it with the box's); and how often its guard decided.
 */
export function driveShareCut(scores: ArrayLike<number>, ranges: [number, number][], share: number): { routed: Uint8Array; guarded: number } {
  const routed = new Uint8Array(scores.length);
  let guarded = 0;
  for (const [start, end] of ranges) {
    const cut = new ShareCut(share, {}, Array.from(scores).slice(Math.max(0, start - 200), start));
    for (let i = start; i < end; i++) {
      const { routed: r, by } = cut.decide(scores[i]!);
      cut.record(scores[i]!, r, by);
      routed[i] = r ? 1 : 0;
    }
    guarded += cut.guarded;
  }
  return { routed, guarded };
}

/** (accuracy − edge) / (cloud − edge) when the `routed` positions take the cloud's answer. */
export function recoveredFraction(o: BudgetOutcomes, routed: ArrayLike<number>): number {
  let edge = 0;
  let cloud = 0;
  let chosen = 0;
  for (let i = 0; i < o.count; i++) {
    edge += o.edgeCorrect[i]!;
    cloud += o.cloudCorrect[i]!;
    chosen += routed[i] ? o.cloudCorrect[i]! : o.edgeCorrect[i]!;
  }
  return cloud !== edge ? (chosen - edge) / (cloud - edge) : Number.NaN;
}

const finite = (x: number): number | null => (Number.isFinite(x) ? x : null);

/** One row per budget and scope (document, then stream). */
export function shareBudgetRows(o: BudgetOutcomes, scores: ArrayLike<number>, shares: readonly number[]): ShareBudgetRow[] {
  const n = o.count;
  return shares.flatMap((share) =>
    (['document', 'stream'] as const).map((scope) => {
      const ranges = scopeRanges(o.paragraph, scope);
      const { routed, guarded } = driveShareCut(scores, ranges, share);
      const full = emptyRange();
      const early = emptyRange();
      for (const [start, end] of ranges) {
        const w = windowShares(routed.subarray(start, end), new ShareCut(share).window);
        for (const x of w.full) widen(full, x);
        for (const x of w.early) widen(early, x);
      }
      const k = routed.reduce((a, b) => a + b, 0);
      const tau = lowestSelection(scores, k).threshold;
      const atTau = Uint8Array.from({ length: n }, (_, i) => (scores[i]! < tau ? 1 : 0));
      return {
        share,
        scope,
        realized_share: n ? k / n : 0,
        routed: k,
        full_windows: full.count,
        full_window_min: finite(full.min),
        full_window_max: finite(full.max),
        early_windows: early.count,
        early_window_min: finite(early.min),
        early_window_max: finite(early.max),
        guarded,
        budget_recovered: recoveredFraction(o, routed),
        tau,
        tau_share: n ? atTau.reduce((a, b) => a + b, 0) / n : 0,
        tau_recovered: recoveredFraction(o, atTau),
      };
    }),
  );
}
