/** bench fleet's event-loop lag probe (loop-lag.ts): how late a timer runs while the loop is busy. */
import { expect, test } from 'bun:test';
import { startLoopLagProbe } from '../src/tools/bench/loop-lag.ts';

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

test('a loop blocked for 60 ms shows a tick about 60 ms late; an idle one, ticks on time', async () => {
  const idle = startLoopLagProbe();
  await Bun.sleep(100);
  const quiet = idle.stop();
  expect(quiet.samples).toBeGreaterThan(10);
  expect(quiet.p50Ms).toBeLessThan(5);

  const busy = startLoopLagProbe();
  await Bun.sleep(20);
  busyFor(60);
  await Bun.sleep(20);
  const blocked = busy.stop();
  // The tick due during the block ran at its end: late by the block, less the interval and what had passed of it.
  expect(blocked.maxMs).toBeGreaterThanOrEqual(55);
  expect(blocked.maxMs).toBeLessThan(200);
  expect(blocked.p50Ms).toBeLessThanOrEqual(blocked.p99Ms);
  expect(blocked.p99Ms).toBeLessThanOrEqual(blocked.maxMs);
});

test('an injected clock: each tick is measured from the one before, never below zero', async () => {
  const times = [0, 2, 4, 30, 31];
  let i = 0;
  const probe = startLoopLagProbe(2, () => times[Math.min(i++, times.length - 1)]!);
  await Bun.sleep(30);
  const lag = probe.stop();
  // Ticks at 2, 4, 30, 31, then 31 again: lags 0, 0, 24, 0 (31 − 30 − 2 is below zero), 0 ...
  expect(lag.maxMs).toBe(24);
  expect(lag.samples).toBeGreaterThanOrEqual(4);
});
