/**
 * The routing budgets' pieces, exactly: the quantile cut, the share budget's feedback and guard, the box's
 * minute of spending, the wait budget's expected wait and share cap (fake clocks), and how a generation's
 * cut combines them. The loop's use of them is tests/decoder-loop-budget.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { BoxRouting } from '../src/edge/routing/box-routing.ts';
import type { CloudClient } from '../src/edge/cloud/cloud-client.ts';
import { RoutingCut } from '../src/edge/routing/routing-cut.ts';
import { ScoreWindow } from '../src/edge/routing/score-window.ts';
import { ShareCut } from '../src/edge/routing/share-cut.ts';
import { TokenSpend } from '../src/edge/routing/token-spend.ts';
import { WaitBudget } from '../src/edge/routing/wait-budget.ts';

function fakeClock(start = 1_000) {
  const clock = { t: start, now: () => clock.t };
  return clock;
}

describe('ScoreWindow', () => {
  test('the cut is the ⌊q·n⌋-th smallest recent score; ±∞ at the ends; null when empty', () => {
    const window = new ScoreWindow(4);
    expect(window.cutAt(0.5)).toBeNull();
    for (const s of [0.9, 0.2, 0.5, 0.7, 0.1]) window.push(s); // 0.9 dropped: [0.1, 0.2, 0.5, 0.7]
    expect(window.size).toBe(4);
    expect(window.cutAt(0.25)).toBe(0.2);
    expect(window.cutAt(0.3)).toBe(0.2); // ⌊1.2⌋: at most 30% of the window below the cut
    expect(window.values()).toEqual([0.2, 0.5, 0.7, 0.1]);
    expect(window.cutAt(0.5)).toBe(0.5);
    expect(window.cutAt(1)).toBe(Number.POSITIVE_INFINITY);
    expect(window.cutAt(0)).toBe(Number.NEGATIVE_INFINITY);
  });
});

describe('ShareCut', () => {
  test('the owed share: on target it is the share; behind it rises, ahead it falls', () => {
    const cut = new ShareCut(0.2, { window: 10, horizon: 5, tolerance: 0.5 });
    expect(cut.owedShare()).toBeCloseTo(0.2, 12); // nothing seen: 0.2·5 / 5
    for (let i = 0; i < 5; i++) cut.record(0.5, false); // 5 seen, none routed: (0.2·10 − 0) / 5
    expect(cut.owedShare()).toBeCloseTo(0.4, 12);
    for (let i = 0; i < 3; i++) cut.record(0.1, true); // last 5 hold 3 routed: (0.2·10 − 3) / 5 < 0
    expect(cut.owedShare()).toBe(0);
  });

  test('a position routes when its score is below the owed quantile of recent scores', () => {
    const cut = new ShareCut(0.5, { window: 10, horizon: 2, tolerance: 0.5 });
    expect(cut.decide(0.1)).toEqual({ routed: false, by: 'cut' }); // no scores yet: nothing routes
    for (const s of [0.4, 0.8]) cut.record(s, false);
    // owed (0.5·4 − 0) / 2 = 1: everything routes
    expect(cut.decide(0.99).routed).toBe(true);
    cut.record(0.3, true);
    cut.record(0.6, true);
    // seen 4, routed 2: owed (0.5·6 − 2) / 2 = 0.5; scores [0.4, 0.8, 0.3, 0.6]: cut = 2nd smallest = 0.6
    expect(cut.cut()).toBe(0.6);
    expect(cut.decide(0.59).routed).toBe(true);
    expect(cut.decide(0.6).routed).toBe(false);
  });

  test('the guard keeps every full window inside share ± tolerance, whatever the scores', () => {
    const cut = new ShareCut(0.1, { window: 20, horizon: 5, tolerance: 0.05 }); // 1 to 3 routed per 20
    const routed: boolean[] = [];
    // Scores that would route everything, then nothing: the quantile alone cannot hold the band.
    for (let i = 0; i < 120; i++) {
      const score = i < 60 ? 0 : 1;
      const d = cut.decide(score);
      cut.record(score, d.routed, d.by);
      routed.push(d.routed);
    }
    for (let start = 0; start + 20 <= routed.length; start++) {
      const count = routed.slice(start, start + 20).filter(Boolean).length;
      expect(count).toBeGreaterThanOrEqual(1);
      expect(count).toBeLessThanOrEqual(3);
    }
    expect(cut.guarded).toBeGreaterThan(0);
  });

  test('the first window is held under the band too: falling scores cannot fill it before it is full', () => {
    const cut = new ShareCut(0.1, { window: 20, horizon: 5, tolerance: 0.05 });
    let routed = 0;
    for (let i = 0; i < 20; i++) {
      const score = 1 - i / 20; // each below every score before it: the quantile routes it whenever anything is owed
      const d = cut.decide(score);
      cut.record(score, d.routed, d.by);
      if (d.routed) routed++;
    }
    expect(routed).toBe(3); // floor(0.15 · 20)
  });

  test('a short generation keeps near its budget while its window grows: at most ⌈(share + tolerance) · tokens so far⌉', () => {
    const cut = new ShareCut(0.2);
    const counts: number[] = [];
    let routed = 0;
    for (let i = 0; i < 40; i++) {
      const score = 1 - i / 40; // falling: every new score is the lowest yet
      const d = cut.decide(score);
      cut.record(score, d.routed, d.by);
      if (d.routed) routed++;
      counts.push(routed);
    }
    counts.forEach((count, i) => expect(count).toBeLessThanOrEqual(Math.max(1, Math.ceil(0.22 * (i + 1) - 1e-9))));
    expect(routed).toBe(9); // ⌈0.22 · 40⌉
  });

  test("a generation's first positions: a quantile of the box's scores before it, never whatever comes first", () => {
    const alone = new ShareCut(0.1);
    const decided = [0.2, 0.99, 0.98, 0.97].map((s) => {
      const d = alone.decide(s);
      alone.record(s, d.routed, d.by);
      return d.routed;
    });
    expect(decided).toEqual([false, false, false, false]); // the surest positions never route for want of scores
    const seeded = new ShareCut(
      0.1,
      {},
      Array.from({ length: 300 }, (_, i) => (i % 100) / 100),
    ); // the last 200 kept
    expect(seeded.cut()).toBe(0.1); // ⌊0.1 · 200⌋ = the 20th smallest of 0.00..0.99 twice
    expect(seeded.decide(0.05).routed).toBe(true);
    expect(seeded.decide(0.5).routed).toBe(false);
    expect(seeded.tokens).toBe(0);
  });

  test('a fork decides exactly as the original from there on', () => {
    const a = new ShareCut(0.15);
    let seed = 3;
    const next = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let i = 0; i < 300; i++) {
      const s = next();
      const d = a.decide(s);
      a.record(s, d.routed, d.by);
    }
    const b = a.fork();
    for (let i = 0; i < 300; i++) {
      const s = next();
      const da = a.decide(s);
      expect(b.decide(s)).toEqual(da);
      a.record(s, da.routed, da.by);
      b.record(s, da.routed, da.by);
    }
  });
});

describe('TokenSpend', () => {
  test('cloud tokens over the last minute, and the box rate over at least five seconds', () => {
    const clock = fakeClock();
    const spend = new TokenSpend(clock.now);
    spend.emitted(10, 2);
    clock.t += 1_000;
    spend.emitted(20, 5);
    expect(spend.cloudTokensLastMinute()).toBe(7);
    expect(spend.tokensPerMinute()).toBe((30 * 60_000) / 5_000); // one second in: read over five
    clock.t += 59_500; // the first entry is now over a minute old
    expect(spend.cloudTokensLastMinute()).toBe(5);
    expect(spend.tokensPerMinute()).toBe(20);
  });

  /** A minute is 600 entries at most; dropped ones wait for compaction until they are half the array. */
  const MOST_HELD = 2 * 600 + 1;
  /** `count` tokens one every `everyMs`, a tenth of them from the cloud, nothing read; the most entries held. */
  function emitTokens(count: number, everyMs: number): { spend: TokenSpend; mostHeld: number } {
    const clock = fakeClock();
    const spend = new TokenSpend(clock.now);
    let mostHeld = 0;
    for (let i = 0; i < count; i++) {
      clock.t += everyMs;
      spend.emitted(1, i % 10 === 0 ? 1 : 0);
      mostHeld = Math.max(mostHeld, spend.heldEntries);
    }
    return { spend, mostHeld };
  }

  test('a box that never reads its spend (no token budget, no scrape) holds at most about a minute of entries', () => {
    // Ten tokens a second for an hour, one entry a token.
    const { spend, mostHeld } = emitTokens(36_000, 100);
    expect(mostHeld).toBeLessThanOrEqual(MOST_HELD);
    // The last minute exactly: entries at (t − 60 s, t], one in ten from the cloud.
    expect(spend.cloudTokensLastMinute()).toBe(60);
    expect(spend.tokensPerMinute()).toBe(600);
  });

  test('a busy box: tokens within 100 ms share an entry, so the entries held do not grow with the rate', () => {
    // A thousand tokens a second for two minutes.
    const { spend, mostHeld } = emitTokens(120_000, 1);
    expect(mostHeld).toBeLessThanOrEqual(MOST_HELD);
    // Entries of 100 tokens (first at t − 99 … t) dropped once their newest is a minute old: the last minute's
    // 60,000 tokens, and none older than a minute and 100 ms.
    expect(spend.tokensPerMinute()).toBe(60_000);
    expect(spend.cloudTokensLastMinute()).toBe(6_000);
  });
});

describe('WaitBudget', () => {
  test('the expected wait: running mean plus twice the running deviation, plus a fresh queue', () => {
    const clock = fakeClock();
    const wait = new WaitBudget(clock.now, { weight: 0.5 });
    expect(wait.expectedWaitMs()).toBeNull();
    expect(wait.allows(10)).toBe(true);
    wait.observe({ waitMs: 40, overloaded: false, failed: false }, 300, 0.1);
    expect(wait.expectedWaitMs()).toBe(40);
    wait.observe({ waitMs: 60, overloaded: false, failed: false, load: { stepsInFlight: 2, stepsQueued: 4, backendMs: 10 } }, 300, 0.1);
    // deviation 0.5·|60 − 40| = 10, mean 50; queue 4·10/2 = 20
    expect(wait.expectedWaitMs()).toBe(50 + 2 * 10 + 20);
    clock.t += 2_001; // the load report is stale
    expect(wait.expectedWaitMs()).toBe(70);
    expect(wait.allows(69)).toBe(false);
    expect(wait.needsProbe(69)).toBe(true);
    wait.observeProbe(10);
    expect(wait.needsProbe(69)).toBe(false);
  });

  test('the share cap: halved from the share routed on congestion, once per round trip; grows while clear', () => {
    const clock = fakeClock();
    const wait = new WaitBudget(clock.now, { weight: 1, increasePerSecond: 0.1, decrease: 0.5, minShare: 0.01 });
    wait.observe({ waitMs: 20, overloaded: true, failed: false }, 300, 0.2);
    expect(wait.cap).toBe(0.1); // 0.5 · min(1, 0.2)
    clock.t += 5; // within one round trip (20 ms): the same congestion, no second decrease
    wait.observe({ waitMs: 20, overloaded: false, failed: false, load: { stepsInFlight: 4, stepsQueued: 1, backendMs: 5 } }, 300, 0.2);
    expect(wait.cap).toBe(0.1);
    clock.t += 100;
    wait.observe({ waitMs: 400, overloaded: false, failed: false }, 300, 0.2); // past the budget
    expect(wait.cap).toBe(0.05);
    clock.t += 1_000;
    wait.observe({ waitMs: 20, overloaded: false, failed: false }, 300, 0.2);
    clock.t += 2_000;
    expect(wait.currentCap()).toBeCloseTo(0.25, 12);
    for (let i = 0; i < 10; i++) {
      clock.t += 1_000;
      wait.observe({ waitMs: 1, overloaded: false, failed: true }, 300, 0.001);
    }
    expect(wait.cap).toBe(0.01); // never below minShare: some steps keep measuring the cloud
  });
});

describe('RoutingCut', () => {
  const box = () => new BoxRouting({}, fakeClock().now);

  test('without a budget it is τ exactly, and reports the threshold policy', () => {
    const cut = RoutingCut.for({ threshold: 0.4 }, box());
    for (const s of [0, 0.39999, 0.4, 0.41, 1]) expect(cut.decide(s)).toEqual({ routed: s < 0.4, cut: 0.4 });
    cut.record(0.1, true);
    cut.record(0.9, false);
    expect(cut.report()).toEqual({
      policy: 'threshold',
      threshold: 0.4,
      cut: 0.4,
      meanCut: 0.4,
      decided: 2,
      routedPositions: 1,
      realizedShare: 0.5,
      overloaded: 0,
    });
  });

  test('policy names join the budgets given', () => {
    expect(RoutingCut.for({ threshold: 0.5, routeShare: 0.1 }, box()).policy).toBe('share');
    expect(RoutingCut.for({ threshold: 0.5, routeShare: 0.1, routeWaitMs: 300 }, box()).policy).toBe('share+wait');
    expect(RoutingCut.for({ threshold: 0.5, routeTokensPerMinute: 60, routeWaitMs: 300 }, box()).policy).toBe('tokens+wait');
  });

  test('a token budget caps the minute: a step asks for no more than is left, and none routes once spent', () => {
    const clock = fakeClock();
    const routing = new BoxRouting({}, clock.now);
    const cut = RoutingCut.for({ threshold: 0.5, routeTokensPerMinute: 5 }, routing);
    expect(cut.maxTokens(4)).toBe(4);
    routing.spend.emitted(3, 3);
    expect(cut.maxTokens(4)).toBe(2);
    routing.spend.emitted(2, 2);
    expect(cut.decide(0)).toEqual({ routed: false, cut: 0 });
    clock.t += 60_001;
    cut.record(0.5, false);
    expect(cut.decide(0).routed).toBe(true); // a minute later the budget is back (0 is below any quantile)
  });

  test('a wait budget routes nothing while a routed token is expected to wait past it, and lowers the cut by its cap', () => {
    const routing = new BoxRouting({}, fakeClock().now);
    const cut = RoutingCut.for({ threshold: 0.5, routeWaitMs: 100 }, routing);
    expect(cut.decide(0.3)).toEqual({ routed: true, by: undefined, cut: 0.5 }); // nothing measured: τ
    for (const s of [0.1, 0.2, 0.3, 0.4]) cut.record(s, s < 0.5);
    cut.observeStep({ waitMs: 50, overloaded: true, failed: false });
    // cap = 0.5 · min(1, routed share so far) ; the wait cut is that quantile of the box's scores
    const cap = routing.wait.cap;
    expect(cap).toBeCloseTo(0.5 * routing.routedShareRecent, 12);
    const waitCut = routing.scores.cutAt(cap)!;
    expect(cut.decide(0.05)).toEqual({ routed: 0.05 < waitCut, by: undefined, cut: Math.min(0.5, waitCut) });
    cut.observeStep({ waitMs: 500, overloaded: false, failed: false });
    expect(cut.decide(0)).toEqual({ routed: false, cut: 0 });
    expect(cut.report()).toMatchObject({ policy: 'wait', waitMs: 100, overloaded: 1 });
    expect(routing.status().overloadedTotal).toBe(1);
  });

  test('a fork decides as the cut does but the box never sees its decisions', () => {
    const routing = new BoxRouting({}, fakeClock().now);
    const cut = RoutingCut.for({ threshold: 0.5, routeShare: 0.2 }, routing);
    for (const s of [0.3, 0.6, 0.1, 0.9]) cut.record(s, cut.decide(s).routed);
    const fork = cut.fork();
    fork.record(0.2, fork.decide(0.2).routed);
    expect(routing.scores.size).toBe(4);
    cut.record(0.2, cut.decide(0.2).routed);
    expect(fork.decide(0.25)).toEqual(cut.decide(0.25));
  });
});

describe('BoxRouting probes', () => {
  /** A cloud whose health check answers when the test says. */
  function probedCloud() {
    const cloud = { calls: 0, answer: (_ms: number) => {}, roundTrip: () => (cloud.calls++, new Promise<number>((resolve) => (cloud.answer = resolve))) };
    return cloud;
  }

  test('a closed wait budget measures the round trip again after two seconds, one probe at a time, and reopens when the link recovers', async () => {
    const clock = fakeClock();
    const routing = new BoxRouting({}, clock.now);
    const cloud = probedCloud();
    routing.observeStep({ waitMs: 480, overloaded: false, failed: false, load: { stepsInFlight: 1, stepsQueued: 0, backendMs: 12 } }, 100);
    expect(routing.wait.allows(100)).toBe(false);
    routing.probeIfDue(100, cloud as unknown as CloudClient);
    expect(cloud.calls).toBe(0); // not yet: two seconds without a measurement first
    clock.t += 2_000;
    routing.probeIfDue(100, cloud as unknown as CloudClient);
    routing.probeIfDue(100, cloud as unknown as CloudClient);
    expect(cloud.calls).toBe(1);
    cloud.answer(30);
    await Bun.sleep(0);
    // A step costs the probe's round trip plus the last reported backend time.
    expect(routing.wait.expectedWaitMs()).toBe(42);
    expect(routing.wait.allows(100)).toBe(true);
  });

  test("before a wait budget's first decision the box measures the round trip once, shared by the generations that ask", async () => {
    const routing = new BoxRouting({}, fakeClock().now);
    const cloud = probedCloud();
    const first = routing.measureFirst(cloud as unknown as CloudClient);
    const second = routing.measureFirst(cloud as unknown as CloudClient);
    expect(second).toBe(first!);
    expect(cloud.calls).toBe(1);
    cloud.answer(250);
    await first;
    expect(routing.wait.expectedWaitMs()).toBe(250);
    expect(routing.wait.allows(200)).toBe(false); // the first routed token would have waited past a 200 ms budget
    expect(routing.measureFirst(cloud as unknown as CloudClient)).toBe(first!);
    expect(cloud.calls).toBe(1);
  });
});
