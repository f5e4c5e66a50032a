/**
 * The scheduler's policy (src/shared/model/scheduler/decode-policy.ts) on a fake queue and a clock the test
 * sets: which appends share the next pass, when it waits for the last pass's sequences, how prompts are
 * cut. No model: sequences are plain objects with a length, known by identity.
 */
import { describe, expect, test } from 'bun:test';
import {
  decideNextPass,
  inKeptRows,
  joinsDecodePass,
  type QueuedSequence,
  type SchedulerQueue,
  type SchedulerSettings,
} from '../src/shared/model/scheduler/decode-policy.ts';

interface Step {
  sequence: QueuedSequence;
  tokens: number[];
}
interface Prefill extends Step {
  done: number;
}

const SETTINGS: SchedulerSettings = { maxBatch: 4, prefillChunk: 16, gatherMs: 4, appendTokens: 1, quietMs: 1000, quietPrefillChunk: 512, poolBytes: Infinity };

const sequence = (length = 10): QueuedSequence => ({ length });
const step = (s: QueuedSequence, tokens = [7]): Step => ({ sequence: s, tokens });
const prefill = (s: QueuedSequence, count: number, done = 0): Prefill => ({ sequence: s, tokens: Array.from({ length: count }, (_, i) => 3 + i), done });

/** A queue that started its turn at 100 ms, the last decode pass ending then too, unless `fields` say otherwise. */
function queue(fields: Partial<SchedulerQueue<Step, Prefill>>): SchedulerQueue<Step, Prefill> {
  return { steps: [], prefills: [], lastPass: new Set(), keptRows: [], turn: 'decode', turnStartedAt: 100, lastDecodeAt: 100, ...fields };
}

describe('decode passes', () => {
  test('nothing queued: idle', () => {
    expect(decideNextPass(queue({}), 100, SETTINGS)).toEqual({ kind: 'idle' });
  });

  test('three steps queued, the last pass all back: one pass of three, in arrival order', () => {
    const [a, b, c] = [sequence(), sequence(), sequence()];
    const steps = [step(a), step(b), step(c)];
    const decision = decideNextPass(queue({ steps, lastPass: new Set([a, b]) }), 100, SETTINGS);
    expect(decision).toEqual({ kind: 'decode', passes: [steps] });
  });

  test('a sequence of the last pass missing: wait until gatherMs after the turn began, then the pass without it', () => {
    const [a, b, c] = [sequence(), sequence(), sequence()];
    const steps = [step(a), step(b)];
    const q = queue({ steps, lastPass: new Set([a, b, c]), turnStartedAt: 100 });
    expect(decideNextPass(q, 100, SETTINGS)).toEqual({ kind: 'wait', untilMs: 104 });
    expect(decideNextPass(q, 103.9, SETTINGS)).toEqual({ kind: 'wait', untilMs: 104 });
    expect(decideNextPass(q, 104, SETTINGS)).toEqual({ kind: 'decode', passes: [steps] });
    // Back in time (its step queued), or queued with a prefill instead: no wait.
    expect(decideNextPass({ ...q, steps: [...steps, step(c)] }, 100, SETTINGS)).toEqual({ kind: 'decode', passes: [[...steps, step(c)]] });
    expect(decideNextPass({ ...q, prefills: [prefill(c, 40)] }, 100, SETTINGS)).toEqual({ kind: 'decode', passes: [steps] });
    // gatherMs 0: never waits.
    expect(decideNextPass(q, 100, { ...SETTINGS, gatherMs: 0 })).toEqual({ kind: 'decode', passes: [steps] });
  });

  test('maxBatch: the first maxBatch steps, without waiting for the missing; the rest in the next pass', () => {
    const seqs = Array.from({ length: 6 }, () => sequence());
    const steps = seqs.slice(0, 5).map((s) => step(s));
    const decision = decideNextPass(queue({ steps, lastPass: new Set(seqs) }), 100, SETTINGS);
    expect(decision).toEqual({ kind: 'decode', passes: [steps.slice(0, 4)] });
  });

  test('rows in the kept batch buffers: a sequence keeps its row among the first ones, the others fill the rest in order', () => {
    const [a, b, c, d] = [sequence(), sequence(), sequence(), sequence()];
    const steps = [step(a), step(b), step(c)];
    // c held row 0, a row 2, d (absent) row 1; b takes the row left.
    expect(inKeptRows(steps, [c, d, a]).map((s) => s.sequence)).toEqual([c, b, a]);
    // A kept row beyond this pass's rows is not kept: a pass of two rows over a sequence that held row 3.
    expect(inKeptRows([step(a), step(b)], [undefined, undefined, undefined, a]).map((s) => s.sequence)).toEqual([a, b]);
    expect(decideNextPass(queue({ steps, keptRows: [c, d, a] }), 100, SETTINGS)).toEqual({ kind: 'decode', passes: [[steps[2]!, steps[1]!, steps[0]!]] });
  });

  test('passes whose batch buffers would not fit the KV pool run as several, each as many rows as fit', () => {
    const steps = [10, 20, 30, 40].map((length) => step(sequence(length)));
    // 1 byte per position of every row: rows of 10 and 20 fit 60 bytes together (2 × 30), a third does not.
    const passBytes = (lengths: readonly number[]) => lengths.length * (Math.max(...lengths) + 10);
    const decision = decideNextPass(queue({ steps }), 100, { ...SETTINGS, passBytes, poolBytes: 60 });
    expect(decision).toEqual({ kind: 'decode', passes: [steps.slice(0, 2), [steps[2]!], [steps[3]!]] });
  });

  test('which appends wait as decode steps: one token; up to appendTokens into a cache', () => {
    expect(joinsDecodePass(1, 0, { appendTokens: 1 })).toBe(true);
    expect(joinsDecodePass(2, 10, { appendTokens: 1 })).toBe(false);
    expect(joinsDecodePass(12, 10, { appendTokens: 16 })).toBe(true);
    expect(joinsDecodePass(12, 0, { appendTokens: 16 })).toBe(false);
    expect(joinsDecodePass(17, 10, { appendTokens: 16 })).toBe(false);
  });
});

describe('prefills', () => {
  test('pieces of prefillChunk take turns with decode passes', () => {
    const [a, b] = [sequence(), sequence(0)];
    const steps = [step(a)];
    const job = prefill(b, 40);
    const q = queue({ steps, prefills: [job], lastPass: new Set([a]) });
    expect(decideNextPass(q, 100, SETTINGS)).toEqual({ kind: 'decode', passes: [steps] });
    expect(decideNextPass({ ...q, turn: 'prefill' }, 100, SETTINGS)).toEqual({ kind: 'prefill', job, tokens: 16 });
    // The last piece is what is left.
    const late = { ...job, done: 32 };
    expect(decideNextPass({ ...q, turn: 'prefill', prefills: [late] }, 100, SETTINGS)).toEqual({ kind: 'prefill', job: late, tokens: 8 });
    // Nobody decoding: pieces on either turn.
    expect(decideNextPass({ ...q, steps: [] }, 100, SETTINGS)).toEqual({ kind: 'prefill', job, tokens: 16 });
  });

  test('quiet after quietMs without a decode pass: pieces of quietPrefillChunk; a step waiting is no quiet', () => {
    const job = prefill(sequence(0), 1000);
    const q = queue({ prefills: [job], lastDecodeAt: 1000 });
    expect(decideNextPass(q, 1999, SETTINGS)).toEqual({ kind: 'prefill', job, tokens: 16 });
    expect(decideNextPass(q, 2000, SETTINGS)).toEqual({ kind: 'prefill', job, tokens: 512 });
    expect(decideNextPass({ ...q, lastDecodeAt: -Infinity }, 0, SETTINGS)).toEqual({ kind: 'prefill', job, tokens: 512 });
    const waiting = { ...q, turn: 'prefill' as const, steps: [step(sequence())] };
    expect(decideNextPass(waiting, 2000, SETTINGS)).toEqual({ kind: 'prefill', job, tokens: 16 });
  });

  test('first prompts together: empty sequences, shortest first, the shortest whole, within prefillChunk and maxBatch', () => {
    const jobs = [17, 3, 10].map((n) => prefill(sequence(0), n));
    const [p17, p3, p10] = jobs as [Prefill, Prefill, Prefill];
    // 16 tokens hold five rows of three: all three prompts, three tokens each.
    expect(decideNextPass(queue({ prefills: jobs }), 100, SETTINGS)).toEqual({ kind: 'prompts-together', jobs: [p3, p10, p17], tokens: 3 });
    // Pieces of 8: two rows of three.
    expect(decideNextPass(queue({ prefills: jobs }), 100, { ...SETTINGS, prefillChunk: 8 })).toEqual({ kind: 'prompts-together', jobs: [p3, p10], tokens: 3 });
    // maxBatch 2: two rows.
    expect(decideNextPass(queue({ prefills: jobs }), 100, { ...SETTINGS, maxBatch: 2 })).toEqual({ kind: 'prompts-together', jobs: [p3, p10], tokens: 3 });
    // A prompt into a cache, or one already partly fed, goes alone: here the oldest, in pieces.
    const cached = prefill(sequence(20), 10);
    const started = { ...p10, done: 3 };
    expect(decideNextPass(queue({ prefills: [cached, started, p17] }), 100, SETTINGS)).toEqual({ kind: 'prefill', job: cached, tokens: 10 });
    // Shortest longer than the chunk allows twice: alone.
    expect(decideNextPass(queue({ prefills: [p17, p10] }), 100, SETTINGS)).toEqual({ kind: 'prefill', job: p17, tokens: 16 });
  });
});
