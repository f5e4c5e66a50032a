/**
 * How late this process's event loop runs a timer: the delay a reply waits before its callback runs. `bench
 * fleet` measures a step's round trip in the process that plays the edges; when that process is busy, the
 * reply waits in its socket and the wait counts as latency the shim added. Sampling the loop beside the
 * steps says how much of the tail is the load generator's own.
 *
 * @example
 * const probe = startLoopLagProbe();
 * await work();
 * const { p99Ms } = probe.stop();
 */
import { percentile } from '../../shared/statistics.ts';

export interface LoopLag {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  samples: number;
}

/** Samples every `intervalMs`: how much later than asked each tick ran (0 when on time). */
export function startLoopLagProbe(intervalMs = 2, now: () => number = () => performance.now()): { stop(): LoopLag } {
  const lags: number[] = [];
  let last = now();
  const timer = setInterval(() => {
    const at = now();
    lags.push(Math.max(0, at - last - intervalMs));
    last = at;
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      return { p50Ms: percentile(lags, 50), p99Ms: percentile(lags, 99), maxMs: lags.length ? Math.max(...lags) : 0, samples: lags.length };
    },
  };
}
