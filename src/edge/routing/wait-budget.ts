/**
 * A wait budget held by the edge box: "never make a user wait more than 300 ms for a token". From what the
 * edge measures (each routed step's wait) and what the shim reports with every reply (its queue, its recent
 * backend time), it keeps two figures every generation under the budget reads:
 *
 * - the wait a routed token should expect: a running mean of the waits plus twice their running mean
 *   deviation (about the 95th percentile of a normal wait), plus the shim's queue ahead of a new step
 *   (queued × backend time / in flight) while that report is fresh. Above the budget, nothing routes: every
 *   routed token would make its user wait too long. While nothing routes nothing is measured, so after
 *   `probeAfterMs` the edge measures the round trip again with the shim's health check (`needsProbe`).
 * - a cap on the share of positions routed, moved as TCP moves its window (additive increase,
 *   multiplicative decrease), which is what lets a thousand edges share one cloud without talking to each
 *   other. A congested reply (the shim refused it as overloaded, reported a queue that would take half the
 *   budget to drain, or it waited past the
 *   budget, or it failed) halves the share routed (of the cap, or of the share actually routed if lower, so
 *   the cut acts at once); after that the cap grows by `increasePerSecond` while replies come back clear.
 *   One decrease per round trip: the replies already on their way report the same congestion.
 *
 * The router still orders positions: the cap is a quantile of the box's recent scores (score-window.ts).
 * Clock injected, so tests are exact.
 *
 * @example
 * const wait = new WaitBudget(() => performance.now());
 * wait.observe({ waitMs: 40, overloaded: false, failed: false }, 300);
 * wait.expectedWaitMs(); // 40 after one reply
 */
import type { CloudLoad } from '../cloud/cloud-client.ts';

export interface WaitBudgetOptions {
  /** Weight of a new wait in the running mean and deviation; 0.2 when omitted. */
  weight?: number;
  /** Growth of the share cap per second of clear replies; 0.1 when omitted. */
  increasePerSecond?: number;
  /** Factor a congested reply leaves of the share routed; 0.5 when omitted. */
  decrease?: number;
  /** The cap never goes below this, so some replies keep measuring the cloud; 0.01 when omitted. */
  minShare?: number;
  /** How old a shim's load report may be and still count; 2 s when omitted. */
  loadTtlMs?: number;
  /** How long the budget stays closed before the round trip is measured again; 2 s when omitted. */
  probeAfterMs?: number;
}

/** What one routed step's answer (or failure) tells the budget. */
export interface StepOutcome {
  /** From sending the step to its reply, refusal or failure. */
  waitMs: number;
  overloaded: boolean;
  failed: boolean;
  load?: CloudLoad;
}

/** The time the shim's queue takes to drain at its recent backend time: queued × backend time / in flight. */
function queueMs(load: CloudLoad | undefined): number {
  return load && load.stepsQueued > 0 ? (load.stepsQueued * load.backendMs) / Math.max(1, load.stepsInFlight) : 0;
}

export class WaitBudget {
  /** Cap on the share of positions routed, in [minShare, 1]. */
  cap = 1;
  private meanMs: number | null = null;
  private deviationMs = 0;
  private load: { value: CloudLoad; at: number } | undefined;
  private clearSince: number | undefined;
  /** No second decrease before this: the replies of that round trip report the same congestion. */
  private holdUntil = Number.NEGATIVE_INFINITY;
  private lastObservedAt: number;
  private readonly o: Required<WaitBudgetOptions>;

  constructor(
    private readonly now: () => number,
    options: WaitBudgetOptions = {},
  ) {
    this.o = { weight: 0.2, increasePerSecond: 0.1, decrease: 0.5, minShare: 0.01, loadTtlMs: 2_000, probeAfterMs: 2_000, ...options };
    this.lastObservedAt = now();
  }

  /** A routed step came back (or failed) after `waitMs`; `budgetMs` is the wait budget it ran under. */
  observe(step: StepOutcome, budgetMs: number, routedShare: number): void {
    const now = this.now();
    this.observeWait(step.waitMs);
    if (step.load) this.load = { value: step.load, at: now };
    // Queued steps alone are no congestion (arrivals are bursty: a queue forms well below capacity); a queue
    // that would take half the budget to drain is.
    const congested = step.overloaded || step.failed || step.waitMs > budgetMs || queueMs(step.load) > budgetMs / 2;
    if (!congested) {
      this.grow(now);
      this.clearSince ??= now;
      return;
    }
    this.clearSince = undefined;
    if (now < this.holdUntil) return;
    this.holdUntil = now + (this.meanMs ?? 0);
    this.cap = Math.max(this.o.minShare, this.o.decrease * Math.min(this.cap, routedShare));
  }

  /**
   * The shim's health check answered after `ms`: a round trip without a step. A step costs that plus the
   * backend's time (the last load report's), so that is the estimate now, unless the running mean is already
   * lower; the deviation is halved. Averaging it in instead would take many probes, seconds apart, to bring
   * back an edge that one burst of slow replies closed.
   */
  observeProbe(ms: number): void {
    this.lastObservedAt = this.now();
    const estimate = ms + (this.load?.value.backendMs ?? 0);
    this.meanMs = this.meanMs === null ? estimate : Math.min(this.meanMs, estimate);
    this.deviationMs /= 2;
  }

  /** The health check failed: nothing learned, but the next probe waits its turn. */
  probeFailed(): void {
    this.lastObservedAt = this.now();
  }

  /** The wait a routed token should expect now, in ms; null before anything was measured. */
  expectedWaitMs(): number | null {
    if (this.meanMs === null) return null;
    const load = this.load && this.now() - this.load.at <= this.o.loadTtlMs ? this.load.value : undefined;
    return this.meanMs + 2 * this.deviationMs + queueMs(load);
  }

  /** Whether a routed token is expected to wait within `budgetMs` (true before any measurement). */
  allows(budgetMs: number): boolean {
    const expected = this.expectedWaitMs();
    return expected === null || expected <= budgetMs;
  }

  /** The share cap as it stands now (it grows while replies come back clear). */
  currentCap(): number {
    this.grow(this.now());
    return this.cap;
  }

  /** True when the budget has kept every step back for `probeAfterMs`: the round trip should be measured again. */
  needsProbe(budgetMs: number): boolean {
    return !this.allows(budgetMs) && this.now() - this.lastObservedAt >= this.o.probeAfterMs;
  }

  private observeWait(ms: number): void {
    this.lastObservedAt = this.now();
    if (this.meanMs === null) {
      this.meanMs = ms;
      return;
    }
    const w = this.o.weight;
    this.deviationMs += w * (Math.abs(ms - this.meanMs) - this.deviationMs);
    this.meanMs += w * (ms - this.meanMs);
  }

  private grow(now: number): void {
    if (this.clearSince === undefined) return;
    this.cap = Math.min(1, this.cap + (this.o.increasePerSecond * (now - this.clearSince)) / 1000);
    this.clearSince = now;
  }
}
