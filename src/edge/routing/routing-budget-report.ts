/**
 * What a generation's `done` event, the OpenAI `usage`, the page and Prometheus say about the cut that
 * decided its routing: which policy, the budgets as given, the cut where it ended, and how much of each
 * budget was used. Filled by the routing cut (routing-cut.ts); serialized by the entry points.
 */

/** Which cut decided: the fixed τ, or the budgets given, joined by `+` (e.g. `share+wait`). */
export type RoutingPolicyName = string;

export interface RoutingBudgetReport {
  policy: RoutingPolicyName;
  /** The budgets as given (absent ones omitted). */
  share?: number;
  tokensPerMinute?: number;
  waitMs?: number;
  /** τ of the request: the cut itself under `threshold`, the ceiling a wait budget lowers otherwise. */
  threshold: number;
  /** The cut on the router's scores at the last decided position: a position routed when its score was below it. */
  cut: number;
  /** Mean of the cut over the decided positions (τ itself under a fixed threshold). */
  meanCut: number;
  /** Positions the router scored, and those routed (sent to the cloud, whatever it answered). */
  decided: number;
  routedPositions: number;
  /** routedPositions / decided (0 before any). */
  realizedShare: number;
  /** Cloud tokens the edge box spent in the last minute, over all generations (with a token budget). */
  tokensLastMinute?: number;
  /** The wait a routed token was expected to cost at the last decision (with a wait budget), in ms. */
  expectedWaitMs?: number;
  /** Positions the share budget's guard decided against its quantile cut (share-cut.ts), with a share or token budget. */
  guarded?: number;
  /** Routed steps the shim refused because its backend was saturated (decided on the edge instead). */
  overloaded: number;
}

/** The report of a generation that routed nothing by a budget: the fixed τ. */
export function thresholdReport(threshold: number): RoutingBudgetReport {
  return { policy: 'threshold', threshold, cut: threshold, meanCut: threshold, decided: 0, routedPositions: 0, realizedShare: 0, overloaded: 0 };
}
