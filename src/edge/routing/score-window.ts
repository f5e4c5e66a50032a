/**
 * The router's most recent scores, and the cut that would have routed a given share of them. Budgets move
 * the cut on the router's scores instead of fixing it: a score's meaning changes with every router and
 * every prompt (docs/results.md), but its rank among the scores just seen does not, so "route the lowest
 * 10%" is a quantile of recent scores. The router still orders positions; only the cut moves.
 *
 * @example
 * const window = new ScoreWindow(4);
 * for (const s of [0.9, 0.2, 0.5, 0.7]) window.push(s);
 * window.cutAt(0.25); // 0.5: a score below it is in the lowest quarter of the last four
 */
export class ScoreWindow {
  private readonly scores: number[] = [];
  private next = 0;

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.scores.length;
  }

  push(score: number): void {
    if (this.scores.length < this.capacity) this.scores.push(score);
    else this.scores[this.next] = score;
    this.next = (this.next + 1) % this.capacity;
  }

  /** The share of the window below `cut`: how much of it τ = cut would have routed; null when empty. */
  shareBelow(cut: number): number | null {
    if (this.scores.length === 0) return null;
    return this.scores.filter((s) => s < cut).length / this.scores.length;
  }

  /**
   * The cut routing a share `q` of the window: the ⌊q·n⌋-th smallest score (0-based), so that at most a
   * share q of the window lies below it (rounding up instead would let a window of a few scores route
   * everything: one score and q = 0.1 would give +∞). Null when the window is empty: no share can be read
   * yet. q ≥ 1 gives +∞ (every score routes), q ≤ 0 gives −∞ (none does).
   */
  cutAt(q: number): number | null {
    const n = this.scores.length;
    if (n === 0) return null;
    if (q <= 0) return Number.NEGATIVE_INFINITY;
    const k = Math.floor(q * n);
    if (k >= n) return Number.POSITIVE_INFINITY;
    return [...this.scores].sort((a, b) => a - b)[k]!;
  }

  /** The scores, oldest first. */
  values(): number[] {
    return this.scores.length < this.capacity ? [...this.scores] : [...this.scores.slice(this.next), ...this.scores.slice(0, this.next)];
  }

  copy(): ScoreWindow {
    const copy = new ScoreWindow(this.capacity);
    copy.scores.push(...this.scores);
    copy.next = this.next;
    return copy;
  }
}
