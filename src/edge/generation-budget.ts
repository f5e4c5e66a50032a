/**
 * A finished generation's routing report, as the entry points read it from its done event's metrics. The
 * loop fills `GenerationMetrics.budget` on every done event (routing-budget.ts); this reader is the one
 * place that also accepts metrics without it (events built before budgets existed), so each surface
 * omits the report rather than inventing one.
 *
 * @example
 * const report = budgetReportOf(done.metrics);
 * if (report) console.log(report.policy, report.cut, report.realizedShare);
 */
import type { GenerationMetrics } from './generation-metrics.ts';
import type { RoutingBudgetReport } from './routing-budget-report.ts';

export function budgetReportOf(metrics: GenerationMetrics): RoutingBudgetReport | undefined {
  return (metrics as GenerationMetrics & { budget?: RoutingBudgetReport }).budget;
}
