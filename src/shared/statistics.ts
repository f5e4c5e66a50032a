/**
 * The few summary statistics the edge's metrics and the benchmarks report, in one place.
 *
 * @example
 * percentile([4, 1, 3, 2], 50); // 2.5
 * round(1.23456);               // 1.235
 */

/** Linear-interpolated percentile of unsorted values (0 for none). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export function mean(values: readonly number[]): number {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0;
}

/** `x` rounded to `digits` decimals, for figures in JSON reports. */
export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
