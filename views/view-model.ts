/**
 * What the views show, as the views need it: the page's whole contract with the edge. The edge's own types
 * (src/edge/loop, src/edge/routing) carry more and are passed in as they are, since TypeScript checks them
 * against these shapes at the one place that renders (src/edge/http/app.tsx); the views import nothing of
 * the edge, so the page can be read, restyled and tested without it.
 */

export type ViewMode = 'joint' | 'small_only' | 'llm_only';
export type ViewFinishReason = 'eos' | 'stop' | 'length' | 'context' | 'cancelled';

/** The request a run panel describes. */
export interface ViewRequest {
  prompt: string;
  mode: ViewMode;
  threshold: number;
  routeShare?: number;
  routeTokensPerMinute?: number;
  routeWaitMs?: number;
  /** Texts the request marked private (its prompt's spans, a chat's messages' spans); the page highlights them. */
  privateTexts?: readonly ViewPrivateText[];
}

/** A text a request marked private, and what kind of thing it is (`name`, `email`, `private`, ...). */
export interface ViewPrivateText {
  text: string;
  kind: string;
}

export type ViewRouteBudget = Pick<ViewRequest, 'routeShare' | 'routeTokensPerMinute' | 'routeWaitMs'>;

/** One generated token: where it came from, its score, what it cost. */
export interface ViewTokenEvent {
  index: number;
  text: string;
  source: 'slm' | 'llm' | 'fallback';
  score: number | null;
  timings: { slmMs: number; routerMs: number; cloudMs: number };
  cloudError?: string;
}

/** The cut that decided a run's routing, and how much of its budgets was used. */
export interface ViewBudgetReport {
  policy: string;
  share?: number;
  tokensPerMinute?: number;
  waitMs?: number;
  threshold: number;
  cut: number;
  meanCut: number;
  decided: number;
  routedPositions: number;
  realizedShare: number;
  tokensLastMinute?: number;
  expectedWaitMs?: number;
  overloaded: number;
}

/** The `auto` speculation decision's figures. */
export interface ViewSpeculationFigures {
  hitRate: number;
  roundTripMs: number | null;
  stepMs: number | null;
  savingMs: number;
  costMs: number;
}

/** What left the box for the cloud in one run (the done event's `metrics.cloud`). */
export interface ViewCloudReport {
  tokensSent: number;
  bytesSent: number;
  hiddenStateBytes: number;
  steps: number;
  streams: number;
  /** Distinct placeholders the cloud read instead of private values. */
  placeholders: number;
  /** Routed positions the edge decided itself because a private value was under way there. */
  withheldSteps: number;
  /** Steps the box's last check stopped (they would have disclosed a private value); absent from older records. */
  gateBlockedSteps?: number;
}

/** A finished run's figures, as the metrics panel shows them. */
export interface ViewMetrics {
  promptTokens: number;
  cachedTokens: number;
  tokens: number;
  routed: number;
  fallback: number;
  routedRatio: number;
  ttftMs: number;
  tbtMeanMs: number;
  tbtP50Ms: number;
  tbtP95Ms: number;
  meanBatchSize: number;
  slmMs: number;
  routerMs: number;
  cloudMs: number;
  totalMs: number;
  speculated: number;
  hitRate: number;
  /** Steps sent while the one before was in flight, on the edge's guess of its answer (decoding ahead). */
  conditionalSteps: number;
  /** Those whose guess was wrong: the cloud skipped them, and what they carried was sent for nothing. */
  conditionalSkipped: number;
  wastedSteps: number;
  savedMs: number;
  speculateSetting: 'on' | 'off' | 'auto';
  speculationDecisions: { ahead: number; waited: number };
  speculationFigures: ViewSpeculationFigures | null;
  budget: ViewBudgetReport;
  cloud: ViewCloudReport;
}

/** One router's free-running run at a share, in the held-out report. */
export interface ViewFreeRun {
  routedShare: number;
  pplCloud: number;
  rep4: number;
}

/** What `router train` measured on held-out documents (router.json's training.held_out_report). */
export interface ViewHeldOutReport {
  noun: string;
  documents: number;
  positions: number;
  /** Recovered share of the edge→cloud gap under teacher forcing. */
  teacherForced: { share: number; router: number; top1: number; entropy: number; random: number }[];
  freeRunning: {
    prompts: number;
    maxNewTokens: number;
    /** 0: greedy. */
    temperature: number;
    atShare: { share: number; router: ViewFreeRun; top1: ViewFreeRun; entropy: ViewFreeRun; random: ViewFreeRun }[];
    /** Sampled reports: greedy runs of the trained router and of random routing at its share, for loops. */
    greedyLoopCheck: { share: number; router: ViewFreeRun; random: ViewFreeRun }[];
    /** The loop check's prompts (0: a report before they were recorded). */
    greedyLoopPrompts: number;
  };
  beatsTop1: boolean;
  verdict: string;
}

/** The router the edge serves, for the page's about box. */
export interface ViewRouterAbout {
  /** `onnx:<folder>` for a trained router pack, `builtin:top1-probability` for the built-in one. */
  name: string;
  defaultThreshold: number;
  /** Absent for the built-in router and for packs trained without a report. */
  report?: ViewHeldOutReport;
}
