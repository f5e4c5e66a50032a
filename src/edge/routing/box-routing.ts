/**
 * The routing state the edge box shares across its generations: what budgets need to know beyond one
 * generation. The token budget's spending over the last minute (token-spend.ts), the wait budget's
 * measured waits and share cap (wait-budget.ts), the box's recent router scores (the wait cap is a quantile
 * of them), the steps the shim refused as overloaded, and the last cut any generation used, for the page and
 * Prometheus. One per engine; generations read it through their RoutingCut (routing-cut.ts).
 *
 * @example
 * const box = new BoxRouting({ routeWaitMs: 300 });
 * box.observeStep({ waitMs: 40, overloaded: false, failed: false }, 300);
 * box.status().expectedWaitMs; // 40
 */
import type { CloudClient, CloudLoad } from '../cloud/cloud-client.ts';
import type { RouteBudget } from '../request/generation-request.ts';
import type { RoutingStatus, RoutingStatusSource } from './routing-status.ts';
import { ScoreWindow } from './score-window.ts';
import { TokenSpend } from './token-spend.ts';
import { WaitBudget, type StepOutcome, type WaitBudgetOptions } from './wait-budget.ts';

/** Scores the wait cap's quantile is read over: a few seconds of a busy box's positions. */
const BOX_SCORE_WINDOW = 500;
/** Weight of one decided position in the box's running routed share. */
const SHARE_WEIGHT = 0.02;

/** The box's routing now (routing-status.ts, read by Prometheus), and more for the logs. */
export interface BoxRoutingStatus extends RoutingStatus {
  /** The edge's default share budget (its --route-share). */
  shareBudget?: number;
  /** The wait budget's cap on the share of positions routed. */
  waitShareCap: number;
  /** The shim's last load report. */
  cloudLoad: CloudLoad | null;
}

export class BoxRouting implements RoutingStatusSource {
  readonly spend: TokenSpend;
  readonly wait: WaitBudget;
  readonly scores = new ScoreWindow(BOX_SCORE_WINDOW);
  overloadedTotal = 0;
  lastCut: number | null = null;
  routedShareRecent = 0;
  private lastLoad: CloudLoad | null = null;
  private probing = false;
  private firstProbe: Promise<void> | undefined;

  constructor(
    /** The edge's --route-* settings: reported, and the defaults the entry points give requests. */
    readonly defaults: RouteBudget = {},
    readonly now: () => number = () => performance.now(),
    waitOptions: WaitBudgetOptions = {},
  ) {
    this.spend = new TokenSpend(now);
    this.wait = new WaitBudget(now, waitOptions);
  }

  /** A generation decided a position (not a speculative one): its score and decision join the box's. */
  observeDecision(score: number, routed: boolean, cut: number | null): void {
    this.scores.push(score);
    this.routedShareRecent += SHARE_WEIGHT * ((routed ? 1 : 0) - this.routedShareRecent);
    this.lastCut = cut;
  }

  /**
   * Under a wait budget that has kept every step back for a while, measures the round trip again in the
   * background (one probe at a time) with the cloud's health check, so routing resumes when the link does.
   */
  probeIfDue(waitBudgetMs: number, cloud: CloudClient | undefined): void {
    if (this.probing || !cloud?.roundTrip || !this.wait.needsProbe(waitBudgetMs)) return;
    this.probing = true;
    this.probe(cloud).finally(() => (this.probing = false));
  }

  /**
   * Before a wait budget's first decision on this box: measures the round trip once (the health check), so
   * the first routed token does not find out the hard way that the link is slower than the budget. The
   * generation awaits it after its prefill, which it overlaps. Undefined once anything was measured, or
   * when the cloud cannot be probed.
   */
  measureFirst(cloud: CloudClient | undefined): Promise<void> | undefined {
    if (this.wait.expectedWaitMs() !== null || !cloud?.roundTrip) return this.firstProbe;
    return (this.firstProbe ??= this.probe(cloud));
  }

  /** One health-check round trip, fed to the wait budget (a failure only resets its probe schedule). */
  private probe(cloud: CloudClient): Promise<void> {
    return cloud.roundTrip!().then(
      (ms) => this.wait.observeProbe(ms),
      () => this.wait.probeFailed(),
    );
  }

  /** A routed step came back, was refused or failed, after `waitMs`; `waitBudgetMs` is its generation's, if any. */
  observeStep(step: StepOutcome, waitBudgetMs: number | undefined): void {
    if (step.overloaded) this.overloadedTotal++;
    if (step.load) this.lastLoad = step.load;
    // Without a wait budget the waits still inform the estimate; congestion is judged against the default budget or none.
    this.wait.observe(step, waitBudgetMs ?? this.defaults.routeWaitMs ?? Number.POSITIVE_INFINITY, this.routedShareRecent);
  }

  status(): BoxRoutingStatus {
    const { routeWaitMs, routeTokensPerMinute, routeShare } = this.defaults;
    const expectedWaitMs = this.wait.expectedWaitMs();
    return {
      cut: this.lastCut,
      ...(routeWaitMs === undefined ? {} : { waitBudgetMs: routeWaitMs }),
      ...(routeTokensPerMinute === undefined ? {} : { tokensPerMinuteBudget: routeTokensPerMinute }),
      ...(routeShare === undefined ? {} : { shareBudget: routeShare }),
      ...(expectedWaitMs === null ? {} : { expectedWaitMs }),
      waitShareCap: this.wait.currentCap(),
      tokensLastMinute: this.spend.cloudTokensLastMinute(),
      overloadedTotal: this.overloadedTotal,
      routedShareRecent: this.routedShareRecent,
      cloudLoad: this.lastLoad,
    };
  }
}
