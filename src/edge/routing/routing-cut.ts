/**
 * The cut one generation's routing is held to: at each position the router scores, whether the position
 * routes. Without a budget it is τ, exactly as before budgets existed (`score < threshold`). With budgets:
 * - a share (`route_share`): the generation's ShareCut (share-cut.ts) moves the cut to hold the share over
 *   every window of tokens; τ is not used;
 * - a token rate (`route_tokens_per_minute`): the box's spending over the last minute is a hard cap (a step
 *   asks for no more tokens than are left), and the rate over the box's own token rate is the share its
 *   ShareCut holds, so the budget spreads over the minute (with a share too, the lower of the two);
 * - a wait (`route_wait_ms`): nothing routes while a routed token is expected to wait past the budget, and
 *   the box's share cap (wait-budget.ts) lowers whatever cut the others give, as the cloud's load grows.
 * Speculation decodes ahead with a `fork`, which decides as this cut will at the same positions without
 * touching the box; the loop then takes the decisions it kept instead of deciding again.
 *
 * @example
 * const cut = RoutingCut.for(request, box);
 * const decision = cut.decide(score);
 * cut.record(score, decision.routed, decision);
 */
import type { BoxRouting } from './box-routing.ts';
import type { GenerationRequest } from '../request/generation-request.ts';
import type { RoutingBudgetReport } from './routing-budget-report.ts';
import { ShareCut, type ShareDecision } from './share-cut.ts';
import type { StepOutcome } from './wait-budget.ts';

type CutRequest = Pick<GenerationRequest, 'threshold' | 'routeShare' | 'routeTokensPerMinute' | 'routeWaitMs'>;

/** One position's decision and the cut it was held to (clamped to [0, 1], the range of scores and τ). */
export interface CutDecision {
  routed: boolean;
  cut: number;
  by?: ShareDecision;
}

const clampCut = (cut: number): number => Math.min(1, Math.max(0, cut));

export class RoutingCut {
  private decided = 0;
  private routedPositions = 0;
  private cutSum = 0;
  private lastCut: number;
  private overloaded = 0;

  private constructor(
    private readonly request: CutRequest,
    private readonly box: BoxRouting,
    private readonly share: ShareCut | undefined,
    /** False for a fork: its decisions are speculative and the box does not see them. */
    private readonly live: boolean,
  ) {
    this.lastCut = request.threshold;
  }

  static for(request: CutRequest, box: BoxRouting): RoutingCut {
    const holdsShare = request.routeShare !== undefined || request.routeTokensPerMinute !== undefined;
    return new RoutingCut(request, box, holdsShare ? new ShareCut(request.routeShare ?? 1, {}, box.scores.values()) : undefined, true);
  }

  /** `threshold`, or the budgets given joined by `+` (`share`, `tokens`, `wait`). */
  get policy(): string {
    const { routeShare, routeTokensPerMinute, routeWaitMs } = this.request;
    const parts = [routeShare !== undefined && 'share', routeTokensPerMinute !== undefined && 'tokens', routeWaitMs !== undefined && 'wait'];
    return parts.filter(Boolean).join('+') || 'threshold';
  }

  /** The wait budget, the deadline this generation's routed steps get. */
  get waitMs(): number | undefined {
    return this.request.routeWaitMs;
  }

  /**
   * Whether a position with this score routes now, and the cut it is held to. Records nothing (`record`
   * does); under a token budget it sets the share that budget holds from the box's current rate.
   */
  decide(score: number): CutDecision {
    const { threshold, routeTokensPerMinute: perMinute, routeWaitMs: waitMs } = this.request;
    let decision: CutDecision;
    if (this.share) {
      if (perMinute !== undefined) this.share.share = Math.min(this.request.routeShare ?? 1, perMinute / Math.max(perMinute, this.box.spend.tokensPerMinute()));
      const { routed, by } = this.share.decide(score);
      decision = { routed, by, cut: clampCut(this.share.cut() ?? 0) };
      if (perMinute !== undefined && this.box.spend.cloudTokensLastMinute() >= perMinute) decision = { routed: false, cut: 0 };
    } else decision = { routed: score < threshold, cut: threshold };
    if (waitMs === undefined) return decision;
    if (!this.box.wait.allows(waitMs)) return { routed: false, cut: 0 };
    const waitCut = this.box.scores.cutAt(this.box.wait.currentCap()) ?? Number.POSITIVE_INFINITY;
    return { routed: decision.routed && score < waitCut, by: decision.by, cut: Math.min(decision.cut, clampCut(waitCut)) };
  }

  /** A decided position; `decision` is what `decide` said, when the caller has it (for the report's cut). */
  record(score: number, routed: boolean, decision: CutDecision = this.decide(score)): void {
    this.share?.record(score, routed, decision.by);
    this.decided++;
    if (routed) this.routedPositions++;
    this.cutSum += decision.cut;
    this.lastCut = decision.cut;
    if (this.live) this.box.observeDecision(score, routed, decision.cut);
  }

  /** Tokens emitted past a position's first: the rest of a cloud span (`cloud`). */
  addTokens(count: number, cloud: boolean): void {
    this.share?.addTokens(count, cloud);
  }

  /** Most tokens a routed step may ask for: the span, or with a token budget no more than this minute has left. */
  maxTokens(span: number): number {
    const perMinute = this.request.routeTokensPerMinute;
    if (perMinute === undefined) return span;
    return Math.max(1, Math.min(span, perMinute - this.box.spend.cloudTokensLastMinute()));
  }

  /** A routed step's outcome: the wait budget learns from it. */
  observeStep(step: StepOutcome): void {
    if (step.overloaded) this.overloaded++;
    if (this.live) this.box.observeStep(step, this.request.routeWaitMs);
  }

  /** A copy deciding as this cut would from here, for positions decoded ahead; the box does not see its decisions. */
  fork(): RoutingCut {
    const copy = new RoutingCut(this.request, this.box, this.share?.fork(), false);
    copy.lastCut = this.lastCut;
    return copy;
  }

  report(): RoutingBudgetReport {
    const { threshold, routeShare, routeTokensPerMinute, routeWaitMs } = this.request;
    const expectedWaitMs = routeWaitMs === undefined ? null : this.box.wait.expectedWaitMs();
    return {
      policy: this.policy,
      ...(routeShare === undefined ? {} : { share: routeShare }),
      ...(routeTokensPerMinute === undefined ? {} : { tokensPerMinute: routeTokensPerMinute, tokensLastMinute: this.box.spend.cloudTokensLastMinute() }),
      ...(routeWaitMs === undefined ? {} : { waitMs: routeWaitMs }),
      ...(expectedWaitMs === null ? {} : { expectedWaitMs }),
      threshold,
      cut: this.lastCut,
      // Under τ the cut never moves: τ itself, not a sum of τs divided back (0.6 · 60 / 60 ≠ 0.6 in floats).
      meanCut: this.decided && this.policy !== 'threshold' ? this.cutSum / this.decided : this.lastCut,
      decided: this.decided,
      routedPositions: this.routedPositions,
      realizedShare: this.decided ? this.routedPositions / this.decided : 0,
      overloaded: this.overloaded,
      ...(this.share ? { guarded: this.share.guarded } : {}),
    };
  }
}
