import type { ConstraintCounts } from '../constraint/token-constraint.ts';
import { mean, percentile } from '../../shared/statistics.ts';
import type { DisclosureReport } from '../cloud/cloud-disclosure.ts';
import type { RoutingBudgetReport } from '../routing/routing-budget-report.ts';
import type { SpeculationFigures } from './speculation/speculation-policy.ts';

/** The speculate setting a generation ran with: forced by the request, or decided per routed position (`auto`). */
export type SpeculateSetting = 'on' | 'off' | 'auto';

/**
 * The per-request figures the final event carries: the columns of the reference design's latency table
 * (She et al., ACL 2025 demo; `bun run bench latency` gives it for this system) and more.
 */

export interface GenerationMetrics {
  promptTokens: number;
  /** Prompt tokens the edge restored from its prompt cache instead of prefilling (0 without one). */
  cachedTokens: number;
  tokens: number;
  routed: number;
  fallback: number;
  routedRatio: number;
  /** Request start → first token event. */
  ttftMs: number;
  /** Edge-side time between tokens (edge model step + router + sampling; cloud waiting excluded). */
  tbtMeanMs: number;
  tbtP50Ms: number;
  tbtP95Ms: number;
  /**
   * Mean rows of the edge forward passes behind this generation's one-token steps: 1 when each ran alone,
   * more when batched with other generations' steps (the edge's --max-batch); 0 before any such step.
   */
  meanBatchSize: number;
  /** Edge model time (prefill included), router time, and communication + cloud model time. */
  slmMs: number;
  prefillMs: number;
  routerMs: number;
  cloudMs: number;
  totalMs: number;
  /** Routed tokens the edge decoded past while the step was on the network, and those whose guess was right. */
  speculated: number;
  speculationHits: number;
  /** speculationHits / speculated (0 when none). */
  hitRate: number;
  /** Speculative edge forward passes thrown away (a wrong guess, a failed step). */
  wastedSteps: number;
  /** Edge time of those thrown-away steps (not part of slmMs or routerMs, which count the tokens emitted). */
  wastedMs: number;
  /** Edge time of the speculative steps kept: decoding that overlapped the wait instead of following it. */
  savedMs: number;
  /** Steps sent while the previous one was in flight (a speculative position routed), assuming its guess. */
  conditionalSteps: number;
  /** Those whose assumed token was wrong: the cloud skipped them. */
  conditionalSkipped: number;
  speculateSetting: SpeculateSetting;
  /** What the request's constraint changed (absent without one): cloud tokens it replaced, constrained fallbacks. */
  constraint?: ConstraintCounts;
  /** In `auto`: the routed positions where the edge decoded ahead, and those where it only waited. */
  speculationDecisions: { ahead: number; waited: number };
  /** In `auto`: the figures of the last decision (null when it made none). */
  speculationFigures: SpeculationFigures | null;
  /** The cut that decided the routing: τ, or the budgets and how much of them was used. */
  budget: RoutingBudgetReport;
  /** What left the box for the cloud: tokens, bytes, hidden-state bytes, placeholders (cloud-disclosure.ts). */
  cloud: DisclosureReport;
}

export class MetricsRecorder {
  private readonly start = performance.now();
  private firstTokenAt: number | undefined;
  private readonly edgeStepMs: number[] = [];
  private decodePasses = 0;
  private decodeRows = 0;
  tokens = 0;
  cachedTokens = 0;
  routed = 0;
  fallback = 0;
  slmMs = 0;
  prefillMs = 0;
  routerMs = 0;
  cloudMs = 0;
  speculated = 0;
  speculationHits = 0;
  wastedSteps = 0;
  wastedMs = 0;
  savedMs = 0;
  conditionalSteps = 0;
  conditionalSkipped = 0;
  speculateSetting: SpeculateSetting = 'off';
  readonly speculationDecisions = { ahead: 0, waited: 0 };
  speculationFigures: SpeculationFigures | null = null;

  constructor(readonly promptTokens: number) {}

  /** The edge time of the last step after the first (undefined before one): what one more edge step costs. */
  get lastStepMs(): number | undefined {
    return this.edgeStepMs.at(-1);
  }

  /** Records one one-token edge forward pass and the rows it ran (AppendResult.batchSize). */
  decodePass(batchSize: number | undefined): void {
    this.decodePasses++;
    this.decodeRows += batchSize ?? 1;
  }

  /** Records one emitted token. */
  token(source: 'slm' | 'llm' | 'fallback'): void {
    this.firstTokenAt ??= performance.now();
    this.tokens++;
    if (source === 'llm') this.routed++;
    if (source === 'fallback') this.fallback++;
  }

  /**
   * Records the edge time of one decoding step. The first step carries the prefill and counts towards
   * TTFT; time between tokens is taken over the steps after it.
   */
  step(edgeMs: number, first: boolean): void {
    if (!first) this.edgeStepMs.push(edgeMs);
  }

  finish(budget: RoutingBudgetReport, cloud: DisclosureReport): GenerationMetrics {
    const now = performance.now();
    return {
      promptTokens: this.promptTokens,
      cachedTokens: this.cachedTokens,
      tokens: this.tokens,
      routed: this.routed,
      fallback: this.fallback,
      routedRatio: this.tokens ? this.routed / this.tokens : 0,
      meanBatchSize: this.decodePasses ? this.decodeRows / this.decodePasses : 0,
      ttftMs: (this.firstTokenAt ?? now) - this.start,
      tbtMeanMs: mean(this.edgeStepMs),
      tbtP50Ms: percentile(this.edgeStepMs, 50),
      tbtP95Ms: percentile(this.edgeStepMs, 95),
      slmMs: this.slmMs,
      prefillMs: this.prefillMs,
      routerMs: this.routerMs,
      cloudMs: this.cloudMs,
      totalMs: now - this.start,
      speculated: this.speculated,
      speculationHits: this.speculationHits,
      hitRate: this.speculated ? this.speculationHits / this.speculated : 0,
      wastedSteps: this.wastedSteps,
      wastedMs: this.wastedMs,
      savedMs: this.savedMs,
      conditionalSteps: this.conditionalSteps,
      conditionalSkipped: this.conditionalSkipped,
      speculateSetting: this.speculateSetting,
      speculationDecisions: { ...this.speculationDecisions },
      speculationFigures: this.speculationFigures,
      budget,
      cloud,
    };
  }
}
