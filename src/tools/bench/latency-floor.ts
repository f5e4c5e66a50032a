/**
 * `bench latency`'s floor: a joint answer's extra time over small_only's, split into where it goes, and the
 * first routed token's wait split the same way.
 * - Cloud prefill on the critical path: the shim's time on the first routed step beyond one cloud decode step
 *   (the median backend time of the steps after each generation's first): the prompt's prefill when the
 *   conversation opens at that token, what is left of it when the prompt went ahead.
 * - Held: the first routed token's wait beyond one round trip and the shim's time on its step. The reply
 *   waited at one end or the other: on the edge, behind a forward pass in flight when the model runs on the
 *   JavaScript thread (`--model-thread main`: a reply that arrives during a speculative pass is read when it
 *   ends); at the shim, behind the prefill or an extend sent ahead, if that was still running when the step came.
 * - Re-decode: the edge's speculative steps thrown away after a wrong guess.
 * - The tail: the rest of the extra time, the round trips the edge could not hide behind its own decoding
 *   (above all the last routed token's, which the answer cannot end before).
 *
 * @example
 * const floor = latencyFloor(runs, rttMs); // per row; `splitExtra(row, smallOnly)` once small_only is known
 */
import { mean, percentile } from '../../shared/statistics.ts';

/** What a generation's cloud steps showed, for the floor. */
export interface FloorRun {
  /** The cloud wait of the generation's first routed token; null when nothing routed. */
  firstRoutedWaitMs: number | null;
  /** The backend time the shim reported for each step, in order. */
  stepBackendMs: number[];
  /** The shim's whole time on each step (backend and its own), in order. */
  stepCloudMs: number[];
  /** Edge time of speculative steps thrown away. */
  wastedMs: number;
}

export interface LatencyFloor {
  /** Mean over the prompts that routed of the first routed token's wait. */
  first_wait_ms: number | null;
  /** One cloud decode step: the median backend time of the steps after each generation's first; null without any. */
  decode_step_ms: number | null;
  /** Means per prompt (0 for a prompt that did not route): see the top of this file. */
  prefill_critical_ms: number;
  held_ms: number;
  redecode_ms: number;
  /** Filled in by `splitExtra`: the row's overall time over small_only's, and what prefill and re-decode leave of it. */
  extra_ms: number;
  tail_ms: number;
}

export function latencyFloor(runs: readonly FloorRun[], rttMs: number): LatencyFloor {
  const later = runs.flatMap((r) => r.stepBackendMs.slice(1));
  const decodeStep = later.length ? percentile(later, 50) : null;
  const firsts = runs.flatMap((r) => (r.firstRoutedWaitMs === null ? [] : [r.firstRoutedWaitMs]));
  const firstCloud = (r: FloorRun) => r.stepCloudMs[0] ?? 0;
  const prefill = (r: FloorRun) => (r.firstRoutedWaitMs === null ? 0 : Math.max(0, firstCloud(r) - (decodeStep ?? 0)));
  const held = (r: FloorRun) => (r.firstRoutedWaitMs === null ? 0 : Math.max(0, r.firstRoutedWaitMs - rttMs - firstCloud(r)));
  return {
    first_wait_ms: firsts.length ? mean(firsts) : null,
    decode_step_ms: decodeStep,
    prefill_critical_ms: mean(runs.map(prefill)),
    held_ms: mean(runs.map(held)),
    redecode_ms: mean(runs.map((r) => r.wastedMs)),
    extra_ms: 0,
    tail_ms: 0,
  };
}

/**
 * Sets the row's extra time over small_only's overall time and the tail that prefill and re-decode leave of it.
 * The held time stays in the tail: while a reply waits behind a speculative pass, that pass's work is kept when
 * its guess was right.
 */
export function splitExtra(row: LatencyFloor & { overall_ms: number }, smallOnlyMs: number): void {
  row.extra_ms = row.overall_ms - smallOnlyMs;
  row.tail_ms = row.extra_ms - row.prefill_critical_ms - row.redecode_ms;
}
