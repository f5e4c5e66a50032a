/**
 * What goes wrong in free-running generation that next-token accuracy cannot see: loops. Measured on the
 * generated ids only (the prompt is the reader's, not the system's).
 *
 * @example
 * rep4([5, 6, 7, 8, 5, 6, 7, 8]); // { repeated: 1, total: 5 }: (5,6,7,8) comes back once
 * isStuck([...Array(16).fill(9)]); // true
 * commonPrefix([1, 2, 3], [1, 2, 4]); // 2
 */
import { RECENT_SPAN, repeatEnds } from '../../edge/routing/router-features.ts';

/** Outputs whose last STUCK_SPAN ids use at most STUCK_DISTINCT distinct ids are stuck in a loop. */
export const STUCK_SPAN = RECENT_SPAN;
export const STUCK_DISTINCT = 2;

/** 4-grams of `ids` that equal an earlier 4-gram of `ids`, and all 4-grams. */
export function rep4(ids: readonly number[]): { repeated: number; total: number } {
  return { repeated: repeatEnds(ids).reduce((s, e) => s + e, 0), total: Math.max(0, ids.length - 3) };
}

/** Whether the last STUCK_SPAN ids use at most STUCK_DISTINCT ids (an output shorter than that is not). */
export function isStuck(ids: readonly number[]): boolean {
  if (ids.length < STUCK_SPAN) return false;
  return new Set(ids.slice(ids.length - STUCK_SPAN)).size <= STUCK_DISTINCT;
}

export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

export interface FreeRunningFigures {
  /** Repeating 4-grams / all 4-grams, pooled over the outputs (NaN without any 4-gram). */
  rep4: number;
  /** Outputs stuck in a loop, out of `outputs`. */
  stuck: number;
  outputs: number;
  /** Outputs that differ from each other: a model that writes the same text whatever the prompt gives few. */
  distinct: number;
  /** Mean common prefix (tokens) with the reference outputs of the same prompts, when given. */
  lcp?: number;
}

export function freeRunningFigures(outputs: readonly (readonly number[])[], reference?: readonly (readonly number[])[]): FreeRunningFigures {
  let repeated = 0;
  let total = 0;
  let stuck = 0;
  for (const ids of outputs) {
    const r = rep4(ids);
    repeated += r.repeated;
    total += r.total;
    if (isStuck(ids)) stuck++;
  }
  const distinct = new Set(outputs.map((ids) => ids.join(','))).size;
  const figures: FreeRunningFigures = { rep4: total ? repeated / total : NaN, stuck, outputs: outputs.length, distinct };
  if (reference) {
    if (reference.length !== outputs.length) throw new Error(`internal: ${outputs.length} outputs against ${reference.length} references`);
    figures.lcp = outputs.length ? outputs.reduce((s, ids, i) => s + commonPrefix(ids, reference[i]!), 0) / outputs.length : NaN;
  }
  return figures;
}
