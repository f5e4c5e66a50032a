/**
 * The cloud state recovers without traffic. On an injected clock: the health probe runs exactly on the
 * breaker's schedule, gives way to a routed step that holds the half-open slot, and stops on close; its
 * real timers are unref'd, and a process that never closes its client still exits. End to end: a real
 * edge (`startEdge`) and the shim as a real process, SIGKILLed and started again on the same port; with
 * no generation running, /readyz and the page's header go from the outage back to `ready`.
 */
import { describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudBackoff } from '../src/edge/cloud/cloud-backoff.ts';
import { CloudHealthProbe, realProbeClock } from '../src/edge/cloud/cloud-health-probe.ts';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge } from '../src/edge/server/edge-server.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { waitFor } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { ManualClock } from './helpers/manual-clock.ts';
import { freePort, ShimProcess } from './helpers/shim-process.ts';

/** A health check answering from `answers` in turn, recording when it was asked and with which signal. */
function scriptedCheck(clock: ManualClock, answers: (boolean | Promise<boolean>)[]) {
  const calls: { at: number; signal: AbortSignal }[] = [];
  const check = (signal: AbortSignal) => {
    calls.push({ at: clock.now(), signal });
    const answer = answers.shift();
    if (answer === undefined) throw new Error('an unexpected health check');
    return Promise.resolve(answer);
  };
  return { calls, check };
}

describe('on an injected clock', () => {
  test('probes when the breaker would let the next attempt through, and a SERVING answer closes it', async () => {
    const clock = new ManualClock();
    const backoff = new CloudBackoff({ initialMs: 100, maxMs: 1_000, failureThreshold: 3, jitter: 0 }, () => clock.now());
    const { calls, check } = scriptedCheck(clock, [false, false, false, true]);
    const probe = new CloudHealthProbe(backoff, check, clock);

    backoff.failure('error'); // a routed step failed at t = 0
    probe.schedule();
    await clock.fireNext(); // t = 100: initialMs after a failure below the threshold; fails (2 of 3)
    expect(backoff.state).toBe('closed');
    await clock.fireNext(); // t = 200: fails (3 of 3): the circuit opens for 100 ms
    expect(backoff.state).toBe('open');
    await clock.fireNext(); // t = 300: half-open, fails: opens again for 200 ms
    expect(backoff.state).toBe('open');
    await clock.fireNext(); // t = 500: SERVING
    expect(calls.map((c) => c.at)).toEqual([100, 200, 300, 500]);
    expect(backoff.state).toBe('closed');
    expect(backoff.consecutiveFailures).toBe(0);
    expect(clock.timers).toEqual([]); // nothing left to probe
    expect(probe.probes).toBe(4);
  });

  test('a routed step that holds the half-open slot is left alone; its failure reschedules the probe', async () => {
    const clock = new ManualClock();
    const backoff = new CloudBackoff({ initialMs: 100, maxMs: 1_000, failureThreshold: 1, jitter: 0 }, () => clock.now());
    const { calls, check } = scriptedCheck(clock, [true]);
    const probe = new CloudHealthProbe(backoff, check, clock);

    backoff.failure('error'); // opens at once (threshold 1) until t = 100
    probe.schedule();
    clock.time = 100;
    backoff.check(); // a routed step becomes the half-open probe first
    await clock.fireNext();
    expect(calls).toEqual([]);
    backoff.failure('error'); // that step failed: open again, until t = 300
    probe.schedule(); // what the client does after each failure
    await clock.fireNext();
    expect(calls.map((c) => c.at)).toEqual([300]);
    expect(backoff.state).toBe('closed');
  });

  test('close disarms the timer and cancels a check in flight, leaving the breaker’s slot free', async () => {
    const clock = new ManualClock();
    const backoff = new CloudBackoff({ initialMs: 100, maxMs: 1_000, failureThreshold: 1, jitter: 0 }, () => clock.now());
    let answer!: (serving: boolean) => void;
    const { calls, check } = scriptedCheck(clock, [new Promise<boolean>((resolve) => (answer = resolve))]);
    const probe = new CloudHealthProbe(backoff, check, clock);

    backoff.failure('error');
    probe.schedule();
    await clock.fireNext(); // t = 100: the check is out, holding the half-open slot
    expect(calls).toHaveLength(1);
    expect(() => backoff.check()).toThrow('a reconnection attempt is in progress');
    probe.close();
    expect(calls[0]!.signal.aborted).toBe(true);
    answer(true);
    await Bun.sleep(0);
    expect(backoff.consecutiveFailures).toBe(1); // a closed probe reports no verdict
    expect(() => backoff.check()).not.toThrow(); // the slot is free again
    probe.schedule();
    expect(clock.timers).toEqual([]);
  });
});

describe('real timers', () => {
  test('the probe’s timers are unref’d', () => {
    const timer = realProbeClock.setTimeout(() => {}, 60_000) as ReturnType<typeof setTimeout>;
    expect(timer.hasRef()).toBe(false);
    realProbeClock.clearTimeout(timer);
  });

  test('a process whose cloud client is probing a dead shim, never closed, still exits on its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'probe-exit-'));
    try {
      const script = join(dir, 'probe-exit.ts');
      writeFileSync(
        script,
        `import { GrpcCloudClient } from ${JSON.stringify(join(PROJECT_ROOT, 'src/edge/cloud/grpc-cloud-client.ts'))};
import { CloudGate } from ${JSON.stringify(join(PROJECT_ROOT, 'src/edge/cloud/cloud-gate.ts'))};
const client = new GrpcCloudClient({ address: '127.0.0.1:${await freePort()}', backoff: { initialMs: 50 } });
const step = { context: [1], sources: ['prompt'], tokenIndex: 0, maxTokens: 1, temperature: 0, topP: 1, stopTokenIds: [], routerScore: 0, threshold: 1, topLogprobs: 0 };
await client.openConversation({ requestId: 'exit', gate: CloudGate.OPEN }).next(step).catch(() => {});
await Bun.sleep(300);
console.log(client.probe.probes >= 2);
`,
      );
      const child = Bun.spawn(['bun', script], { stdout: 'pipe', stderr: 'pipe', timeout: 20_000 });
      const started = performance.now();
      const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
      expect(stdout.trim()).toBe('true'); // it was probing (at 50 ms, 100 ms, ...) when the script ended
      expect(code).toBe(0);
      expect(performance.now() - started).toBeLessThan(10_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('a shim killed and started again on the same port', () => {
  test('with no traffic, /readyz and the header go from the outage back to ready', async () => {
    const demo = await ensureDemoPacks();
    const port = await freePort();
    let shim = await ShimProcess.start(port, demo.cloudPack);
    const flags = [
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--grpc-port',
      'off',
      '--log-level',
      'error',
      '--edge-model',
      demo.edgePack,
      '--router',
      demo.routerPack,
    ];
    const edge = await startEdge(parseEdgeConfig([...flags, '--cloud', `127.0.0.1:${port}`], {}));
    const cloudState = async () => ((await (await fetch(`${edge.url}readyz`)).json()) as { cloud: string }).cloud;
    const headerState = async () => /cloud: ([a-z-]+)/.exec(await (await fetch(`${edge.url}fragments/cloud-state`)).text())?.[1];
    const generate = async () => {
      const body = await (
        await fetch(`${edge.url}api/generate`, {
          method: 'POST',
          body: JSON.stringify({ prompt: 'Once upon a time', mode: 'joint', threshold: 1, max_new_tokens: 8 }),
          headers: { 'content-type': 'application/json' },
        })
      ).text();
      return body
        .split('\n\n')
        .filter((block) => block.startsWith('event: token'))
        .map((block) => JSON.parse(block.slice(block.indexOf('data:') + 5)) as { source: string; cloud_error?: string });
    };
    try {
      expect((await generate()).every((t) => t.source === 'llm')).toBe(true);
      expect(await cloudState()).toBe('ready');

      await shim.kill();
      const outage = await generate();
      expect(outage.every((t) => t.source === 'fallback')).toBe(true);
      expect(outage[0]!.cloud_error).toBe('cloud unreachable (connection refused)');
      expect(await cloudState()).toBe('circuit-open');
      expect(await headerState()).toBe('circuit-open');

      shim = await ShimProcess.start(port, demo.cloudPack);
      // No generation from here on: only the health probe can find the shim.
      const until = performance.now() + 30_000;
      while ((await cloudState()) !== 'ready') {
        if (performance.now() > until) throw new Error(`the cloud state stayed ${await cloudState()}`);
        await Bun.sleep(50);
      }
      expect(await headerState()).toBe('ready');
      expect((await generate()).every((t) => t.source === 'llm')).toBe(true);
    } finally {
      await edge.stop();
      await shim.kill();
    }
  }, 90_000);
});
