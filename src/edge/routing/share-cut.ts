/**
 * A share budget held by one generation: "route at most (and about) 10% of tokens", over every window of
 * `window` tokens. Deterministic: the decisions depend only on the scores and decisions before them, so
 * greedy outputs repeat exactly for a given budget, and a copy (`fork`) decides as the original would.
 *
 * How the cut moves, and why this way:
 * - The cut is a quantile of the generation's recent scores (score-window.ts): the router still orders the
 *   positions, only how many of them route changes.
 * - Which quantile: the share the window still owes. If the last `window − horizon` tokens routed r, the
 *   next `horizon` must route `share·window − r` for the window to end on target, so the quantile is that
 *   over `horizon` (clamped to [0, 1]). Before the window fills, the tokens seen so far stand for it. The
 *   horizon trades the band for the order: a short one follows the count closely and routes more positions
 *   out of the router's order. Of 20, 35 and 50, 50 lost the least quality against fixed τ over the
 *   shares compared (docs/routing-budgets.md, "Measured"). A
 *   quantile of fixed τ's scores alone would wander: at 10% of 200 tokens a binomial count varies by ±4
 *   tokens (±0.02) at one standard deviation, so feedback on the count is what holds the band.
 * - A guard keeps every full window inside `share ± tolerance`: a position is routed whatever its score
 *   when the window would otherwise fall below the band, and held when routing would take it above (and,
 *   while too few scores were seen to trust a quantile, above the band over the tokens so far).
 *   The quantile keeps the guard rare; `guarded` counts the positions it decided.
 *
 * @example
 * const cut = new ShareCut(0.1);
 * const { routed, by } = cut.decide(score); // the router's score at this position
 * cut.record(score, routed, by);
 */
import { ScoreWindow } from './score-window.ts';

export interface ShareCutOptions {
  /** Tokens a budget is held over; 200 when omitted. */
  window?: number;
  /** Tokens over which a deficit or surplus is made up; 50 when omitted. */
  horizon?: number;
  /** How far any full window's share may stray from the target; 0.02 when omitted. */
  tolerance?: number;
}

/** What decided a position: the quantile cut, or the guard of the window's band. */
export type ShareDecision = 'cut' | 'guard-route' | 'guard-hold';

export class ShareCut {
  readonly window: number;
  readonly horizon: number;
  readonly tolerance: number;
  private scores: ScoreWindow;
  /** routedBefore[i]: cloud tokens among the generation's first i tokens. */
  private routedBefore: number[] = [0];
  /** Positions the guard decided, against the quantile. */
  guarded = 0;

  constructor(
    /** The target share; may change between positions (a token budget turns a rate into a share). */
    public share: number,
    options: ShareCutOptions = {},
    /**
     * Scores from before this generation (the box's latest), oldest first: the first positions' quantile is
     * read over them rather than over the generation's first few scores alone, which would route whatever
     * scores came first. They fill the score window only; the counts start at zero.
     */
    seedScores: readonly number[] = [],
  ) {
    this.window = options.window ?? 200;
    this.horizon = options.horizon ?? 50;
    this.tolerance = options.tolerance ?? 0.02;
    this.scores = new ScoreWindow(this.window);
    for (const score of seedScores.slice(-this.window)) this.scores.push(score);
  }

  /** Tokens recorded so far. */
  get tokens(): number {
    return this.routedBefore.length - 1;
  }

  /** Cloud tokens among the last `m` tokens. */
  routedInLast(m: number): number {
    const n = this.tokens;
    const from = Math.max(0, n - m);
    return this.routedBefore[n]! - this.routedBefore[from]!;
  }

  /** The share the current window still owes over the next `horizon` tokens, in [0, 1]. */
  owedShare(): number {
    const seen = Math.min(this.tokens, this.window - this.horizon);
    const owed = (this.share * (seen + this.horizon) - this.routedInLast(seen)) / this.horizon;
    return Math.min(1, Math.max(0, owed));
  }

  /** The cut on scores at this position (null before any score: nothing routes yet). */
  cut(): number | null {
    return this.scores.cutAt(this.owedShare());
  }

  /** Whether a position with this score routes, and what decided it. */
  decide(score: number): { routed: boolean; by: ShareDecision } {
    // Integer bounds of the band, with a margin for float error in share·window (0.08·200 = 16.000000000000004).
    // The upper one holds from the first token. While the quantile is read over fewer scores than a window
    // (a box's first generation, with no scores to seed it), it cannot be trusted: the bound then holds over
    // the tokens so far (rounded up, so the first token may route), so a short generation stays near its
    // budget. The lower one holds once a full window can be reached.
    const length = this.scores.size < this.window ? Math.min(this.tokens + 1, this.window) : this.window;
    const before = this.routedInLast(length - 1);
    const ceiling = (this.share + this.tolerance) * length;
    const highest = length < this.window ? Math.max(1, Math.ceil(ceiling - 1e-9)) : Math.floor(ceiling + 1e-9);
    if (before + 1 > highest) return { routed: false, by: 'guard-hold' };
    const lowest = Math.ceil((this.share - this.tolerance) * this.window - 1e-9);
    if (this.tokens >= this.window - 1 && before < lowest) return { routed: true, by: 'guard-route' };
    const cut = this.cut();
    return { routed: cut !== null && score < cut, by: 'cut' };
  }

  /** A decided position: its score joins the window and its token the count. */
  record(score: number, routed: boolean, by?: ShareDecision): void {
    this.scores.push(score);
    this.addTokens(1, routed);
    if (by && by !== 'cut') this.guarded++;
  }

  /** Tokens emitted without a decision of their own: the rest of a routed span (`routed`), or nothing else. */
  addTokens(count: number, routed: boolean): void {
    for (let i = 0; i < count; i++) this.routedBefore.push(this.routedBefore.at(-1)! + (routed ? 1 : 0));
  }

  /** A copy deciding exactly as this one would from here (speculation decodes ahead with it). */
  fork(): ShareCut {
    const copy = new ShareCut(this.share, { window: this.window, horizon: this.horizon, tolerance: this.tolerance });
    copy.scores = this.scores.copy();
    copy.routedBefore = [...this.routedBefore];
    copy.guarded = this.guarded;
    return copy;
  }
}
