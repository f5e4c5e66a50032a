/**
 * What a threshold does on teacher-forced text: at every position the token is routed when the router's
 * score is below τ; the routed position then counts the cloud model's top-1, the others the edge
 * model's. τ = 0 routes nothing (scores are never negative) and τ = 1 routes everything (a sigmoid never
 * reaches 1), so the curve runs from edge-only to cloud-only accuracy (`smallOnlyAccuracy` and
 * `largeOnlyAccuracy`: names of the --json output, after the modes small_only and llm_only).
 */
import type { TeacherForced } from '../lab/forced-records.ts';

export interface RoutingPoint {
  threshold: number;
  routedRatio: number;
  /** Next-token top-1 accuracy with routing at this threshold. */
  accuracy: number;
}

export interface RoutingCurve {
  positions: number;
  smallOnlyAccuracy: number;
  largeOnlyAccuracy: number;
  points: RoutingPoint[];
}

/** τ = 0, 0.1, ..., 1. */
export const DEFAULT_THRESHOLDS = Array.from({ length: 11 }, (_, i) => i / 10);

export function routingCurve(
  forced: Pick<TeacherForced, 'count' | 'edgeCorrect' | 'cloudCorrect'>,
  scores: ArrayLike<number>,
  thresholds: readonly number[] = DEFAULT_THRESHOLDS,
): RoutingCurve {
  const n = forced.count;
  let edgeRight = 0;
  let cloudRight = 0;
  for (let i = 0; i < n; i++) {
    edgeRight += forced.edgeCorrect[i]!;
    cloudRight += forced.cloudCorrect[i]!;
  }
  const points = thresholds.map((threshold) => {
    let routed = 0;
    let correct = 0;
    for (let i = 0; i < n; i++) {
      const route = scores[i]! < threshold;
      if (route) routed++;
      correct += route ? forced.cloudCorrect[i]! : forced.edgeCorrect[i]!;
    }
    return { threshold, routedRatio: routed / n, accuracy: correct / n };
  });
  return { positions: n, smallOnlyAccuracy: edgeRight / n, largeOnlyAccuracy: cloudRight / n, points };
}

export function formatRoutingCurve(curve: RoutingCurve): string {
  const lines = [
    `positions ${curve.positions}; edge-only accuracy ${curve.smallOnlyAccuracy.toFixed(4)}; cloud-only accuracy ${curve.largeOnlyAccuracy.toFixed(4)}`,
    '   τ   routed   accuracy',
  ];
  for (const p of curve.points) {
    lines.push(`${p.threshold.toFixed(2).padStart(5)}   ${p.routedRatio.toFixed(4)}   ${p.accuracy.toFixed(4)}`);
  }
  return lines.join('\n');
}
