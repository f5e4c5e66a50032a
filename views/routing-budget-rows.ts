/**
 * The metrics panel's rows about the cut that decided a run's routing (its done event's report): the
 * policy and the effective cut, then each budget beside how much of it was used.
 *
 * @example
 * budgetRows({ policy: 'share', share: 0.2, threshold: 0.5, cut: 0.43, meanCut: 0.42, decided: 50, routedPositions: 10, realizedShare: 0.2, overloaded: 0 });
 * // [['Routing policy (cut at the last position, mean)', 'share: cut 0.430 (mean 0.420)', 'policy'],
 * //  ['Routing budget used', 'routed 20.0% of positions (10 / 50), target 20.0%', 'budget']]
 */
import type { ViewBudgetReport as RoutingBudgetReport } from './view-model.ts';

const percent = (share: number) => `${(share * 100).toFixed(1)}%`;

/** What each budget given allows and what the run used of it; under a fixed τ, the share it routed. */
function budgetUse(r: RoutingBudgetReport): string {
  const routed = `routed ${percent(r.realizedShare)} of positions (${r.routedPositions} / ${r.decided})`;
  const parts = [r.share === undefined ? routed : `${routed}, target ${percent(r.share)}`];
  if (r.tokensPerMinute !== undefined) parts.push(`${r.tokensLastMinute ?? 0} of ${r.tokensPerMinute} cloud tokens per minute (box)`);
  if (r.waitMs !== undefined) parts.push(`expected wait ${r.expectedWaitMs === undefined ? '?' : `${r.expectedWaitMs.toFixed(1)} ms`} of ${r.waitMs} ms`);
  if (r.overloaded > 0) parts.push(`${r.overloaded} steps refused by an overloaded cloud`);
  return parts.join('; ');
}

/** [label, value, data-metric key] rows, as the panel lists them. */
export function budgetRows(r: RoutingBudgetReport): [string, string, string][] {
  const cut = r.policy === 'threshold' ? `τ ${r.threshold.toFixed(2)}` : `cut ${r.cut.toFixed(3)} (mean ${r.meanCut.toFixed(3)})`;
  return [
    ['Routing policy (cut at the last position, mean)', `${r.policy}: ${cut}`, 'policy'],
    ['Routing budget used', budgetUse(r), 'budget'],
  ];
}
