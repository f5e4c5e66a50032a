/**
 * A finished generation's routing report, as the entry points (page, OpenAI usage, Prometheus) read it
 * from its done event's metrics. The loop fills `GenerationMetrics.budget` on every done event
 * (routing-budget.ts); this reader is the one place that also accepts metrics without it (a loop or a
 * hand-built event from before budgets), so each surface then omits the report rather than inventing one.
 * Once every done event carries it, callers may read `metrics.budget` directly.
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
