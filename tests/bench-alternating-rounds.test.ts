/**
 * `bench decode --peer`'s alternation: the round scheduler on fake sides with known step times (exact
 * medians and ratios), and our side's child process over the line protocol on the tiny-qwen2 bench pack.
 * llama.cpp itself is never installed nor run here.
 */
import { describe, expect, test } from 'bun:test';
import { alternateRounds, roundStepCounts, summarizeRounds, type RoundSide } from '../src/tools/bench/alternating-rounds.ts';
import { benchConcurrencyOn, formatConcurrency, repeatRatios } from '../src/tools/bench/concurrency.ts';
import { lineSide } from '../src/tools/bench/decode-peer.ts';
import { DECODE_ROUND_CHILD } from '../src/tools/bench/decode-round-child.ts';
import { LineProcess } from '../src/tools/bench/line-process.ts';
import { ensureBenchPack } from '../src/tools/models/random-pack.ts';

/** A side whose round r returns `rounds[r]`, writing what it is asked into `calls`. */
function fakeSide(name: string, rounds: number[][], calls: string[]): RoundSide {
  let next = 0;
  return {
    warmUp: async (steps) => void calls.push(`${name} warm-up ${steps}`),
    runRound: async (steps) => {
      calls.push(`${name} round ${steps}`);
      const round = rounds[next++]!;
      expect(round.length).toBe(steps);
      return round;
    },
  };
}

describe('the round scheduler', () => {
  test('steps split over rounds differ by at most one and add up', () => {
    expect(roundStepCounts(32, 6)).toEqual([5, 5, 6, 5, 5, 6]);
    expect(roundStepCounts(8, 4)).toEqual([2, 2, 2, 2]);
    expect(roundStepCounts(3, 3)).toEqual([1, 1, 1]);
  });

  test('ours and the peer alternate, each warmed up right before its first round, with exact medians and ratios', async () => {
    const calls: string[] = [];
    // The machine slows down 2× in round 2: both sides' medians move, the per-round ratio does not.
    const ours = fakeSide(
      'ours',
      [
        [20, 22, 24],
        [40, 44, 48],
        [21, 23, 19],
      ],
      calls,
    );
    const peer = fakeSide(
      'peer',
      [
        [10, 11, 12],
        [20, 22, 24],
        [20, 20, 20],
      ],
      calls,
    );
    const a = await alternateRounds(ours, peer, { steps: 9, rounds: 3, warmup: 2 });
    expect(calls).toEqual(['ours warm-up 2', 'ours round 3', 'peer warm-up 2', 'peer round 3', 'ours round 3', 'peer round 3', 'ours round 3', 'peer round 3']);
    expect(a.ours.roundMsPerToken).toEqual([22, 44, 21]);
    expect(a.peer.roundMsPerToken).toEqual([11, 22, 20]);
    expect(a.roundRatios).toEqual([2, 2, 1.05]);
    expect(a.ratioByRound).toEqual({ median: 2, min: 1.05, max: 2 });
    // Medians over all nine steps: ours 19..48 → 23, the peer's 10..24 → 20.
    expect(a.ours.msPerToken).toBe(23);
    expect(a.peer.msPerToken).toBe(20);
    expect(a.ratio).toBe(23 / 20);
    expect(a.ours.minMsPerToken).toBe(19);
    expect(a.peer.minMsPerToken).toBe(10);
    expect(a.peer.msPerTokenP90).toBe(22.4);
  });

  test('no warm-up asked, none run; bad counts and mismatched rounds are refused', async () => {
    const calls: string[] = [];
    await alternateRounds(fakeSide('ours', [[1]], calls), fakeSide('peer', [[2]], calls), { steps: 1, rounds: 1, warmup: 0 });
    expect(calls).toEqual(['ours round 1', 'peer round 1']);
    const idle = fakeSide('x', [], []);
    await expect(alternateRounds(idle, idle, { steps: 2, rounds: 3, warmup: 0 })).rejects.toThrow('1 ≤ rounds ≤ steps');
    expect(() => summarizeRounds([[1]], [[1], [2]])).toThrow('the same number of rounds');
    expect(() => summarizeRounds([[]], [[1]])).toThrow('none of them empty');
  });
});

describe('the line protocol', () => {
  test('a helper that exits before it answers, says it failed or stays silent is a clear error', async () => {
    const log = () => {};
    await expect(LineProcess.start({ command: [process.execPath, '-e', 'process.exit(3)'], name: 'the quitter', log })).rejects.toThrow(
      'the quitter exited with code 3 before answering "ready"',
    );
    const failing = `console.log(JSON.stringify({ type: 'failed', message: 'no such model' }))`;
    await expect(LineProcess.start({ command: [process.execPath, '-e', failing], name: 'the failing one', log })).rejects.toThrow(
      'the failing one failed: no such model',
    );
    const gone = await LineProcess.start({
      command: [process.execPath, '-e', `console.log(JSON.stringify({ type: 'ready' }))`],
      name: 'the short-lived one',
      log,
    });
    await expect(gone.helper.request({ type: 'round', steps: 1 })).rejects.toThrow('the short-lived one exited with code 0 before answering "round"');
    await gone.helper.close();
    const silent = 'setTimeout(() => {}, 60_000)';
    await expect(LineProcess.start({ command: [process.execPath, '-e', silent], name: 'the silent one', log, timeoutMs: 300 })).rejects.toThrow(
      'the silent one did not answer "ready" within 300 ms',
    );
  });

  test('our decode child: loaded once, it answers warm-up, rounds, a bad request and finish, and two of them alternate', async () => {
    const dir = await ensureBenchPack('tiny-qwen2', () => {});
    const options = { dir, threads: 1, promptTokens: 8, plannedSteps: 2 + 6, bandwidthGbS: 10 };
    const lines: string[] = [];
    const start = () =>
      LineProcess.start({ command: [process.execPath, DECODE_ROUND_CHILD, JSON.stringify(options)], name: 'our tiny decode', log: (l) => lines.push(l) });
    const a = await start();
    try {
      expect(a.ready.type).toBe('ready');
      expect(a.ready.prefill_ms).toBeGreaterThan(0);
      await expect(a.helper.request({ type: 'round', steps: 0 })).rejects.toThrow('our tiny decode failed: "steps" must be a whole number ≥ 1, got 0');
      await expect(a.helper.request({ type: 'rewind' })).rejects.toThrow('unknown request "rewind" (known: warmup, round, finish)');
      const b = await start();
      try {
        const alternation = await alternateRounds(lineSide(a.helper), lineSide(b.helper), { steps: 6, rounds: 2, warmup: 2 });
        expect(alternation.ours.roundMsPerToken.length).toBe(2);
        expect(alternation.roundRatios.every((r) => r > 0)).toBe(true);
        const { result } = await a.helper.request<{ result: Record<string, unknown> & { rounds: { ms_per_token: number }[] } }>({ type: 'finish' });
        // The session still stood after the bad requests: 6 measured steps in 2 rounds, the given bandwidth.
        expect(result.ms_per_token).toBe(alternation.ours.msPerToken);
        expect(result.min_ms_per_token).toBe(alternation.ours.minMsPerToken);
        expect(result.rounds.map((r) => r.ms_per_token)).toEqual(alternation.ours.roundMsPerToken);
        expect(result.bandwidth_gb_s).toBe(10);
        expect(result.prompt_tokens).toBe(8);
      } finally {
        await b.helper.close();
      }
    } finally {
      await a.helper.close();
    }
    expect(lines.some((l) => l.includes(`loading ${dir}`))).toBe(true);
  }, 120_000);
});

test("bench concurrency: the peer's row for each user count runs right after ours, with our prompts", async () => {
  const dir = await ensureBenchPack('tiny-qwen2', () => {});
  const order: string[] = [];
  const result = await benchConcurrencyOn('tiny', dir, {
    users: [1, 2],
    promptTokens: 4,
    newTokens: 2,
    maxBatch: 2,
    threads: 1,
    log: (line) => order.push(line.replace(/:.*tokens\/s.*$/, '').replace(/^loading .*/, 'loading')),
    afterUsers: async (users, prompts) => {
      order.push(
        `peer ${users} users on ${prompts
          .slice(0, users)
          .map((p) => p.length)
          .join(',')} prompt tokens`,
      );
    },
  });
  expect(order).toEqual(['loading', 'tiny', 'tiny', 'peer 1 users on 4 prompt tokens', 'tiny', 'tiny', 'peer 2 users on 4,4 prompt tokens']);
  expect(result.rounds.map((r) => `${r.users} ${r.batched}`)).toEqual(['1 false', '1 true', '2 false', '2 true']);
}, 120_000);

test("bench concurrency --repeat: each row over its own repeat's first row, median and range per user count", () => {
  const row = (repeat: number, users: number, batched: boolean, tokensPerSecond: number) => ({ repeat, users, batched, tokensPerSecond });
  const ratios = repeatRatios([
    row(0, 1, false, 10),
    row(0, 1, true, 12),
    row(0, 4, false, 11),
    row(0, 4, true, 25),
    row(1, 1, false, 20),
    row(1, 1, true, 20),
    row(1, 4, false, 30),
    row(1, 4, true, 60),
    row(2, 1, false, 8),
    row(2, 1, true, 10),
    row(2, 4, false, 8),
    row(2, 4, true, 20),
  ]);
  expect(ratios).toEqual([
    { users: 1, batched: false, median: 1, min: 1, max: 1 },
    { users: 1, batched: true, median: 1.2, min: 1, max: 1.25 },
    { users: 4, batched: false, median: 1.1, min: 1, max: 1.5 },
    { users: 4, batched: true, median: 2.5, min: 2.5, max: 3 },
  ]);
});

test("bench concurrency --repeat 2: the user counts run twice over, each repeat's rows together", async () => {
  const dir = await ensureBenchPack('tiny-qwen2', () => {});
  const result = await benchConcurrencyOn('tiny', dir, { users: [1, 2], repeats: 2, promptTokens: 4, newTokens: 2, maxBatch: 2, threads: 1, log: () => {} });
  expect(result.rounds.map((r) => `${r.repeat} ${r.users} ${r.batched}`)).toEqual([
    '0 1 false',
    '0 1 true',
    '0 2 false',
    '0 2 true',
    '1 1 false',
    '1 1 true',
    '1 2 false',
    '1 2 true',
  ]);
  expect(result.byRepeat.map((r) => `${r.users} ${r.batched}`)).toEqual(['1 false', '1 true', '2 false', '2 true']);
  expect(result.byRepeat[0]).toEqual({ users: 1, batched: false, median: 1, min: 1, max: 1 });
  // Time inside onnxruntime's run is part of each round's wall time, and its ratios are taken the same way.
  for (const r of result.rounds) {
    expect(r.runMs).toBeGreaterThan(0);
    expect(r.runMs).toBeLessThan(r.wallMs);
  }
  expect(result.byRepeatInsideRun.map((r) => `${r.users} ${r.batched}`)).toEqual(['1 false', '1 true', '2 false', '2 true']);
  expect(result.byRepeatInsideRun[0]).toEqual({ users: 1, batched: false, median: 1, min: 1, max: 1 });
  const second = result.rounds.filter((r) => r.repeat === 1);
  const inside = (r: (typeof second)[number]) => (r.tokens / r.runMs) * 1000;
  expect([result.byRepeatInsideRun[3]!.min, result.byRepeatInsideRun[3]!.max]).toContain(inside(second[3]!) / inside(second[0]!));
  const table = formatConcurrency([result]);
  expect(table).toContain("× first row of the same repeat, median (min–max) of 2 | the same inside onnxruntime's run only (ceiling) |");
  expect(table).toContain('| tiny | 1 | alone | 1.00× (1.00–1.00) | 1.00× (1.00–1.00) |');
}, 120_000);

test('bench decode --peer: more rounds than steps is refused before anything is loaded or installed', () => {
  const r = Bun.spawnSync(
    ['bun', 'src/tools/bench/cli.ts', 'decode', '--preset', 'tiny-qwen2', '--dtype', 'q4', '--peer', 'llama.cpp', '--steps', '2', '--rounds', '3'],
    { stdout: 'pipe', stderr: 'pipe' },
  );
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toContain('--rounds must be in [1, 2], got 3');
});
