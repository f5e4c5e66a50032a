/**
 * The box-level state of the routing cut, as the engine's routing state reports it (box-routing.ts)
 * and Prometheus shows it at each scrape: the cut now in force, the budgets the box holds and how much of
 * each is used. A generation's own figures are its done event's `RoutingBudgetReport`.
 *
 * @example
 * const status = engine.routing?.status();
 * if (status?.waitBudgetMs !== undefined) console.log(`${status.expectedWaitMs} of ${status.waitBudgetMs} ms`);
 */

export interface RoutingStatus {
  /** The cut on the router's scores now in force; null before any routing decision made under a budget. */
  cut: number | null;
  /** The wait budget per token the box holds (ms), when one is set. */
  waitBudgetMs?: number;
  /** The wait a routed token is expected to cost now (round trip and cloud load), with a wait budget. */
  expectedWaitMs?: number;
  /** Most cloud tokens the box spends per minute, when a token budget is set. */
  tokensPerMinuteBudget?: number;
  /** Cloud tokens the box spent over the last minute, all generations together. */
  tokensLastMinute: number;
  /** Routed steps the shim refused as overloaded since start (decided on the edge instead). */
  overloadedTotal: number;
  /** Share of recently decided positions that were routed, over all generations. */
  routedShareRecent: number;
}

/** What the engine exposes as `engine.routing`: the status, read when asked (at a Prometheus scrape). */
export interface RoutingStatusSource {
  status(): RoutingStatus;
}
