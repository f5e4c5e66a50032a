/**
 * Whether decoding ahead pays, decided at each routed position from measured figures (`--speculate auto`).
 *
 * Decoding ahead at a routed position runs about `n = min(depth, roundTrip / step)` edge steps before the
 * reply. With probability p (the edge's top-1 guess is the cloud's token) they are kept: n steps of edge
 * time hidden behind the wait. Otherwise they are thrown away: n steps of edge CPU spent for nothing (on
 * a shared box, other users' CPU), and the pass under way when the reply comes must finish before the
 * loop goes on (half a step on average). So it decodes ahead when
 *
 *     saving = p · n · step   >   cost = (1 − p) · (n · step + step / 2)
 *
 * which with n ≥ 1 needs p above about one half. p is a running estimate kept across generations and fed
 * at every routed position whether or not the edge decoded ahead there (comparing the reply with the
 * guess costs one argmax), so auto turns itself on again when guesses start to hit. Its prior is low
 * (0.3): routed positions are those where the router doubts the edge's token, and on the demo pair the
 * guess there was never right. The round trip and the edge's step time are running estimates too; until
 * both are measured it waits. Every figure comes in through `observe*`, so decisions are exact in tests.
 *
 * Why per routed position rather than per generation: the figures move within a generation (the first
 * reply measures the round trip), and a generation that starts missing stops paying at once.
 *
 * @example
 * const policy = new SpeculationPolicy();
 * policy.observeRoundTrip(50); policy.observeStep(5); policy.observeGuess(true);
 * policy.decide(16); // { speculate: false, figures: { hitRate: 0.44, stepsAhead: 10, savingMs: 22, costMs: 29.4, ... } }
 */

/** The figures behind one decision, all per routed position. */
export interface SpeculationFigures {
  /** Running estimate that the edge's guess at a routed position is the cloud's token. */
  hitRate: number;
  /** Running estimate of a routed step's round trip; null before the first reply. */
  roundTripMs: number | null;
  /** Running estimate of one edge step (forward pass, router, sampling); null before the first. */
  stepMs: number | null;
  /** Edge steps decoded ahead during one round trip (at most the depth). */
  stepsAhead: number;
  /** Expected edge time hidden behind the round trip. */
  savingMs: number;
  /** Expected edge time thrown away plus the last pass finishing after the reply. */
  costMs: number;
}

export interface SpeculationDecision {
  speculate: boolean;
  figures: SpeculationFigures;
}

export interface SpeculationPolicyOptions {
  /** The hit rate assumed before any guess is observed; 0.3 when omitted. */
  priorHitRate?: number;
  /** Weight of each new observation in the running estimates (exponential moving average); 0.2 when omitted. */
  weight?: number;
}

export const DEFAULT_PRIOR_HIT_RATE = 0.3;
const DEFAULT_WEIGHT = 0.2;

export class SpeculationPolicy {
  private hitRate: number;
  private roundTripMs: number | null = null;
  private stepMs: number | null = null;
  private readonly weight: number;

  constructor(options: SpeculationPolicyOptions = {}) {
    this.hitRate = options.priorHitRate ?? DEFAULT_PRIOR_HIT_RATE;
    this.weight = options.weight ?? DEFAULT_WEIGHT;
  }

  /** A routed step's reply came in: `hit` when it was the edge's guess. */
  observeGuess(hit: boolean): void {
    this.hitRate += this.weight * ((hit ? 1 : 0) - this.hitRate);
  }

  observeRoundTrip(ms: number): void {
    this.roundTripMs = this.average(this.roundTripMs, ms);
  }

  observeStep(ms: number): void {
    this.stepMs = this.average(this.stepMs, ms);
  }

  /** Whether to decode ahead at a routed position, with at most `depth` steps. */
  decide(depth: number): SpeculationDecision {
    const { hitRate: p, roundTripMs, stepMs } = this;
    if (roundTripMs === null || stepMs === null || stepMs <= 0) {
      return { speculate: false, figures: { hitRate: p, roundTripMs, stepMs, stepsAhead: 0, savingMs: 0, costMs: 0 } };
    }
    const stepsAhead = Math.min(depth, roundTripMs / stepMs);
    const savingMs = p * stepsAhead * stepMs;
    const costMs = (1 - p) * (stepsAhead * stepMs + stepMs / 2);
    return { speculate: stepsAhead >= 1 && savingMs > costMs, figures: { hitRate: p, roundTripMs, stepMs, stepsAhead, savingMs, costMs } };
  }

  private average(current: number | null, value: number): number {
    return current === null ? value : current + this.weight * (value - current);
  }
}
