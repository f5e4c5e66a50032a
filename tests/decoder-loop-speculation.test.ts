import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { interceptSteps, type CloudClient, type CloudStepReply } from '../src/edge/cloud/cloud-client.ts';
import { generate, type DoneEvent, type EdgeEngine, type GenerationEvent, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { readGenerationRequest } from '../src/edge/request/generation-request-fields.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { AppError } from '../src/shared/errors.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { edgeEcho, late } from './helpers/scripted-clouds.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';
import { recordingSteps } from './helpers/step-recording.ts';
import type { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';

let edge: DecoderModel;
let cloudModel: DecoderModel;
let tokenizer: TextTokenizer;
let cloud: InProcessCloud;
const router = new TopProbabilityScorer();
const PROMPTS = [
  'Once upon a time, there was a little dog',
  'Lily went to the park',
  'The sun was hot and',
  'Tom had a big red ball. One day',
  'Mom said',
  'There was a tree',
];

let pair: DemoPairModels;
beforeAll(async () => {
  pair = await loadDemoPairModels({ record: false });
  ({ edge, cloudModel, tokenizer, cloud } = pair);
});

afterAll(() => pair.release());

const echo = (offset: number, delayMs: number) => edgeEcho(edge, tokenizer, offset, delayMs);

async function run(raw: RawGenerationRequest, overrides: Partial<EdgeEngine> = {}, signal?: AbortSignal) {
  const eng: EdgeEngine = { edgeModel: edge, router, tokenizer, cloud: late(cloud, 5), ...overrides };
  const events: GenerationEvent[] = [];
  for await (const e of generate(eng, parseGenerationRequest({ prompt: PROMPTS[0], ...raw }), signal)) events.push(e);
  const tokens = events.filter((e): e is TokenEvent => e.type === 'token');
  const done = events.at(-1) as DoneEvent;
  expect(done.type).toBe('done');
  return { tokens, done, decisions: tokens.map((t) => `${t.id}:${t.source}:${t.score}`) };
}

/** Runs `raw` without and with speculation and checks that every emitted token, source and score match. */
async function same(raw: RawGenerationRequest, overrides: Partial<EdgeEngine> = {}) {
  const off = await run({ ...raw, speculate: false }, overrides);
  const on = await run({ ...raw, speculate: true }, overrides);
  expect(on.decisions).toEqual(off.decisions);
  expect(on.done.text).toBe(off.done.text);
  expect(on.done.finishReason).toBe(off.done.finishReason);
  expect(off.done.metrics.speculated).toBe(0);
  return { off, on };
}

describe('the policy is unchanged by speculation (greedy)', () => {
  test('many prompts and thresholds: identical tokens, sources and router scores; guesses are kept and thrown away', async () => {
    let hits = 0;
    let wasted = 0;
    for (const prompt of PROMPTS) {
      for (const threshold of [0.3, 0.6, 0.9]) {
        const { on } = await same({ prompt, mode: 'joint', threshold, maxNewTokens: 24 });
        const routed = on.tokens.filter((t) => t.source === 'llm').length;
        expect(on.done.metrics.speculated).toBeLessThanOrEqual(routed);
        expect(on.done.metrics.speculationHits).toBeLessThanOrEqual(on.done.metrics.speculated);
        hits += on.done.metrics.speculationHits;
        wasted += on.done.metrics.wastedSteps;
      }
    }
    // The demo pair disagrees often enough that both branches ran.
    expect(hits).toBeGreaterThan(0);
    expect(wasted).toBeGreaterThan(0);
  }, 120_000);

  test('the edge model runs once per kept token plus the wasted speculative steps', async () => {
    const runs = edge.stats.runs;
    const { tokens, done } = await run({ mode: 'joint', threshold: 0.6, maxNewTokens: 30, speculate: true });
    expect(done.metrics.speculated).toBeGreaterThan(0);
    expect(tokens.length).toBe(30);
    expect(edge.stats.runs - runs).toBe(1 + 29 + done.metrics.wastedSteps);
    expect(edge.stats.liveSequences).toBe(0);
  });

  test('a cloud that always agrees: every routed token is a hit and no step is wasted', async () => {
    const { on } = await same({ mode: 'joint', threshold: 0.9, maxNewTokens: 30 }, { cloud: echo(0, 20) });
    expect(on.done.metrics.routed).toBeGreaterThan(0);
    expect(on.done.metrics.speculationHits).toBe(on.done.metrics.speculated);
    expect(on.done.metrics.speculated).toBeGreaterThan(0);
    expect(on.done.metrics.hitRate).toBe(1);
    expect(on.done.metrics.wastedSteps).toBe(0);
    expect(on.done.metrics.savedMs).toBeGreaterThan(0);
  });

  test('a cloud that always disagrees: nothing is kept, every speculative step is wasted', async () => {
    const { on } = await same({ mode: 'joint', threshold: 0.6, maxNewTokens: 30 }, { cloud: echo(1, 20) });
    expect(on.done.metrics.speculated).toBeGreaterThan(0);
    expect(on.done.metrics.speculationHits).toBe(0);
    expect(on.done.metrics.wastedSteps).toBeGreaterThan(0);
    expect(on.done.metrics.savedMs).toBe(0);
  });

  test('a cloud that answers late: speculation stops at the bound and waits', async () => {
    const { on } = await same({ mode: 'joint', threshold: 0.6, maxNewTokens: 30 }, { cloud: late(cloud, 60), speculation: { depth: 2 } });
    expect(on.done.metrics.speculated).toBeGreaterThan(0);
    expect(on.done.metrics.wastedSteps).toBeLessThanOrEqual(2 * on.done.metrics.speculated);
  });

  test('a cloud that fails mid-speculation: the same fallback tokens, and the guess is kept', async () => {
    const failing = interceptSteps(cloud, async () => {
      await Bun.sleep(20);
      throw new AppError('UNAVAILABLE', 'connection reset');
    });
    const { on } = await same({ mode: 'joint', threshold: 0.6, maxNewTokens: 30 }, { cloud: failing });
    expect(on.tokens.filter((t) => t.source === 'fallback').length).toBeGreaterThan(0);
    expect(on.tokens.every((t) => t.source !== 'fallback' || t.cloudError === 'connection reset')).toBe(true);
    // With greedy decoding the edge's fallback is its guess: the speculation is kept.
    expect(on.done.metrics.speculationHits).toBe(on.done.metrics.speculated);
  });

  test('a route span is never speculated past (its tokens are fed to the edge as one pass)', async () => {
    const { on } = await same({ mode: 'joint', threshold: 0.9, maxNewTokens: 24, routeSpan: 3 });
    expect(on.done.metrics.speculated).toBe(0);
  });
});

/** Waits for the replies a generation did not wait for (a skipped step behind the last routed position). */
async function settled(counts: { inFlight: number }): Promise<void> {
  while (counts.inFlight > 0) await Bun.sleep(5);
}

/** The in-process cloud with each step held 20 to 40 ms (by its token index, so both runs see the same). */
function jittery(inner: CloudClient): CloudClient {
  return interceptSteps(inner, async (request, next) => (await Bun.sleep(20 + ((request.tokenIndex * 7) % 21)), next(request)));
}

/**
 * Like edgeEcho, with the shim's rule for conditional steps: one whose assumed token is not what the step
 * before it returned is answered `skipped`. Steps are answered in order.
 */
function echoingShim(offset: number, delayMs: number): CloudClient {
  const inner = echo(offset, 0);
  return {
    openConversation: (options) => {
      const conversation = inner.openConversation(options);
      let previous: Promise<number[] | undefined> = Promise.resolve(undefined);
      return {
        next(request) {
          const assumed = previous;
          const reply = (async (): Promise<CloudStepReply> => {
            await Bun.sleep(delayMs);
            const before = await assumed;
            if (request.conditional && !(before && before.every((id, i) => request.context[i] === id))) {
              return { tokens: [], text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: 0, shimMs: 0, skipped: true };
            }
            return conversation.next(request);
          })();
          previous = reply.then(
            (r) => (r.skipped ? undefined : [...request.context, ...r.tokens]),
            () => undefined,
          );
          return reply;
        },
        close: () => conversation.close(),
      };
    },
    state: () => 'ready',
    close: async () => {},
  };
}

describe('conditional steps: a second routed position is sent while the first is in flight', () => {
  // Thresholds at which routed positions come close together on the demo pair.
  const THRESHOLDS = [0.7, 0.85, 0.95];

  /** Runs every prompt and threshold without and with speculation on fresh clouds from `makeCloud`; returns the totals. */
  async function sweep(makeCloud: () => CloudClient, raw: RawGenerationRequest = {}) {
    const totals = { steps: 0, conditional: 0, skipped: 0, conditionalMetric: 0, skippedMetric: 0, hits: 0, maxInFlight: 0, routed: 0, endedByEos: 0 };
    for (const prompt of PROMPTS) {
      for (const threshold of THRESHOLDS) {
        const off = await run({ prompt, mode: 'joint', threshold, maxNewTokens: 24, ...raw, speculate: false }, { cloud: makeCloud() });
        const { client, counts } = recordingSteps(makeCloud());
        const on = await run({ prompt, mode: 'joint', threshold, maxNewTokens: 24, ...raw, speculate: true }, { cloud: client });
        await settled(counts);
        expect(on.decisions).toEqual(off.decisions);
        expect(on.done.text).toBe(off.done.text);
        expect(on.done.finishReason).toBe(off.done.finishReason);
        expect(off.done.metrics.conditionalSteps).toBe(0);
        totals.steps += counts.steps;
        totals.conditional += counts.conditional;
        totals.skipped += counts.skipped;
        totals.maxInFlight = Math.max(totals.maxInFlight, counts.maxInFlight);
        totals.conditionalMetric += on.done.metrics.conditionalSteps;
        totals.skippedMetric += on.done.metrics.conditionalSkipped;
        totals.hits += on.done.metrics.speculationHits;
        totals.routed += on.done.metrics.routed;
        if (on.done.finishReason === 'eos') totals.endedByEos++;
      }
    }
    expect(edge.stats.liveSequences).toBe(0);
    // Never more than the step and one conditional step behind it.
    expect(totals.maxInFlight).toBeLessThanOrEqual(2);
    return totals;
  }

  test('the in-process cloud answering in 20 to 40 ms: identical decisions; conditional steps sent, served and skipped', async () => {
    const totals = await sweep(() => jittery(cloud));
    expect(totals.conditional).toBeGreaterThan(0);
    expect(totals.conditionalMetric).toBe(totals.conditional);
    expect(totals.maxInFlight).toBe(2);
    // The demo pair disagrees often enough that some assumptions fail, and agrees often enough that some hold.
    expect(totals.skipped).toBeGreaterThan(0);
    expect(totals.skipped).toBeLessThan(totals.conditional);
  }, 240_000);

  test('a cloud that always agrees: conditional steps are served, never skipped', async () => {
    const totals = await sweep(() => echoingShim(0, 20));
    expect(totals.conditional).toBeGreaterThan(0);
    // Each routed position asked once: a served conditional step is the one its position uses. (A step whose
    // reply ends the text emits no token: at most one per generation that ended so.)
    expect(totals.steps).toBeGreaterThanOrEqual(totals.routed);
    expect(totals.steps).toBeLessThanOrEqual(totals.routed + totals.endedByEos);
    expect(totals.skipped).toBe(0);
    expect(totals.skippedMetric).toBe(0);
  }, 240_000);

  test('a cloud that always disagrees: every conditional step comes back skipped', async () => {
    const totals = await sweep(() => echoingShim(1, 20));
    expect(totals.conditional).toBeGreaterThan(0);
    expect(totals.skipped).toBe(totals.conditional);
    expect(totals.skippedMetric).toBe(totals.conditional);
    expect(totals.hits).toBe(0);
    // The skipped ones come on top of one step per routed position (and per reply that ended the text).
    expect(totals.steps - totals.skipped).toBeGreaterThanOrEqual(totals.routed);
    expect(totals.steps - totals.skipped).toBeLessThanOrEqual(totals.routed + totals.endedByEos);
  }, 240_000);

  test('a cloud that fails from the tenth token on: the same fallback tokens (failed conditional steps are sent again at their position)', async () => {
    const failingLate = () =>
      interceptSteps(jittery(cloud), async (request, next) => {
        if (request.tokenIndex < 10) return next(request);
        await Bun.sleep(15);
        throw new AppError('UNAVAILABLE', 'connection reset');
      });
    const totals = await sweep(failingLate);
    expect(totals.conditional).toBeGreaterThan(0);
  }, 240_000);

  test('sampling: the same seed gives the same output with conditional steps', async () => {
    for (const seed of [1, 2, 3]) {
      const off = await run(
        { mode: 'joint', threshold: 0.9, temperature: 0.9, topP: 0.95, seed, maxNewTokens: 30, speculate: false },
        { cloud: jittery(cloud) },
      );
      const { client, counts } = recordingSteps(jittery(cloud));
      const on = await run({ mode: 'joint', threshold: 0.9, temperature: 0.9, topP: 0.95, seed, maxNewTokens: 30, speculate: true }, { cloud: client });
      expect(on.decisions).toEqual(off.decisions);
      expect(counts.conditional).toBeGreaterThan(0);
    }
  }, 60_000);

  test('engine.conditionalSteps false: speculation stops at the second routed position, as before', async () => {
    const { client, counts } = recordingSteps(jittery(cloud));
    const off = await run(
      { mode: 'joint', threshold: 0.9, maxNewTokens: 30, speculate: true },
      { cloud: jittery(cloud), speculation: { conditionalSteps: false } },
    );
    const on = await run({ mode: 'joint', threshold: 0.9, maxNewTokens: 30, speculate: true }, { cloud: client });
    expect(on.decisions).toEqual(off.decisions);
    expect(off.done.metrics.conditionalSteps).toBe(0);
    expect(on.done.metrics.conditionalSteps).toBe(counts.conditional);
    expect(counts.conditional).toBeGreaterThan(0);
  });

  test('an abort with a conditional step in flight ends the generation and releases both checkpoints', async () => {
    const controller = new AbortController();
    let conditionalSent = false;
    // Steps that never answer on their own; the abort comes once a conditional step went out.
    const held = interceptSteps(cloud, (request) => {
      if (request.conditional && !conditionalSent) {
        conditionalSent = true;
        setTimeout(() => controller.abort(), 5);
      }
      return new Promise((_, reject) => request.signal?.addEventListener('abort', () => reject(new AppError('CANCELLED', 'aborted'))));
    });
    const live = edge.stats.liveSequences;
    const { tokens, done } = await run({ mode: 'joint', threshold: 0.95, maxNewTokens: 30, speculate: true }, { cloud: held }, controller.signal);
    expect(conditionalSent).toBe(true);
    expect(done.finishReason).toBe('cancelled');
    expect(tokens.every((t) => t.source !== 'llm')).toBe(true);
    expect(edge.stats.liveSequences).toBe(live);
  });
});

describe('sampling', () => {
  test('the same seed gives the same output with and without speculation, the cloud sampling too', async () => {
    for (const seed of [1, 2, 3, 42]) {
      await same({ mode: 'joint', threshold: 0.6, temperature: 0.9, topP: 0.95, seed, maxNewTokens: 30 });
    }
  }, 60_000);

  test('a failing cloud with sampling: the fallback draw comes after a rewind, so the output is the same', async () => {
    const failing = interceptSteps(cloud, async () => {
      await Bun.sleep(20);
      throw new AppError('UNAVAILABLE', 'connection reset');
    });
    const { on } = await same({ mode: 'joint', threshold: 0.6, temperature: 1, seed: 7, maxNewTokens: 30 }, { cloud: failing });
    expect(on.done.metrics.speculationHits).toBe(0);
  });
});

describe('cancellation', () => {
  test('an abort while a routed step is out ends the generation and releases the speculative cache', async () => {
    const controller = new AbortController();
    // A step that never answers on its own: like the gRPC client, it rejects when the request's signal aborts.
    const held = interceptSteps(cloud, (request) => {
      setTimeout(() => controller.abort(), 30);
      return new Promise((_, reject) => request.signal?.addEventListener('abort', () => reject(new AppError('CANCELLED', 'aborted'))));
    });
    const live = edge.stats.liveSequences;
    const started = performance.now();
    const { tokens, done } = await run({ mode: 'joint', threshold: 0.9, maxNewTokens: 30, speculate: true }, { cloud: held }, controller.signal);
    expect(done.finishReason).toBe('cancelled');
    expect(tokens.every((t) => t.source !== 'llm')).toBe(true);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(edge.stats.liveSequences).toBe(live);
  });
});

describe('edge failures', () => {
  test('the edge failing while speculating fails the generation as it would without speculation, not as a cloud fallback', async () => {
    let calls = 0;
    // Routes the first position, then fails on the next call: the router's score of the first speculative position.
    const failingRouter = {
      info: router.info,
      score: async () => {
        if (++calls > 1) throw new AppError('INTERNAL', 'router failed');
        return 0;
      },
      release: async () => {},
    };
    const live = edge.stats.liveSequences;
    const error = await run({ mode: 'joint', threshold: 0.5, maxNewTokens: 10, speculate: true }, { router: failingRouter, cloud: late(cloud, 50) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).message).toBe('router failed');
    expect(calls).toBe(2);
    expect(edge.stats.liveSequences).toBe(live);
  });
});

describe('request field', () => {
  test('speculate is off by default and parsed strictly', () => {
    expect(parseGenerationRequest({ prompt: 'x' }).speculate).toBe(false);
    expect(parseGenerationRequest({ prompt: 'x', speculate: true }).speculate).toBe(true);
    // Text is the form reader's to turn into a boolean (a select's on/off); here only a boolean passes.
    expect(() => parseGenerationRequest({ prompt: 'x', speculate: 'off' })).toThrow('speculate must be true or false, got "off"');
    expect(readGenerationRequest({ prompt: 'x', speculate: 'off' }, 'form').speculate).toBe(false);
    expect(readGenerationRequest({ prompt: 'x', speculate: 'on' }, 'form').speculate).toBe(true);
    expect(readGenerationRequest({ prompt: 'x', speculate: 'auto' }, 'form').speculate).toBe('auto');
    expect(parseGenerationRequest({ prompt: 'x' }, undefined, 0.5, 'auto').speculate).toBe('auto');
    expect(() => readGenerationRequest({ prompt: 'x', speculate: 'maybe' }, 'form')).toThrow('speculate must be on, off or auto, got "maybe"');
    expect(() => readGenerationRequest({ prompt: 'x', speculate: 'auto' }, 'typed')).toThrow('speculate must be true or false, got "auto"');
    expect(() => readGenerationRequest({ prompt: 'x', speculate: 'true' }, 'typed')).toThrow('speculate must be true or false, got "true"');
  });

  test('the README and docs/api.md give the values the readers take: true/false typed, on/off/auto in forms', () => {
    const row = readFileSync('README.md', 'utf8')
      .split('\n')
      .find((line) => line.startsWith('| `speculate` |'));
    expect(row).toContain(
      "`true` or `false` in JSON and gRPC (left out, the edge's `--speculate`, which may be `auto`); `on`, `off` or `auto` in the page's forms",
    );
    expect(readFileSync('docs/api.md', 'utf8').replaceAll('\n', ' ')).toContain(
      '`speculate` as `on`, `off` or `auto`, where JSON and gRPC take `true` or `false`',
    );
    for (const word of ['on', 'off', 'auto']) expect(() => readGenerationRequest({ prompt: 'x', speculate: word }, 'form')).not.toThrow();
    for (const value of [true, false]) expect(readGenerationRequest({ prompt: 'x', speculate: value }, 'typed').speculate).toBe(value);
  });
});

describe('DecoderSequence checkpoint and rollback', () => {
  test('previousHidden is the hidden state of the position before the last: zeros first, then across prefills, spans and rollbacks', async () => {
    const prompt = tokenizer.encode(PROMPTS[0]!, { addBos: true });
    const reference = edge.newSequence();
    const all = await reference.append([...prompt, 7, 8, 9], { allPositions: true });
    reference.dispose();
    const h = edge.pack.hiddenSize;
    const row = (i: number) => Array.from(all.allHidden!.subarray(i * h, (i + 1) * h));
    const close = (got: Float32Array, want: number[]) => got.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 4));

    const seq = edge.newSequence();
    const first = await seq.append(prompt.slice(0, 1));
    expect(Array.from(first.previousHidden)).toEqual(new Array(h).fill(0)); // nothing before the first position
    const prefill = await seq.append(prompt.slice(1));
    close(prefill.previousHidden, row(prompt.length - 2)); // a multi-token append: its second-to-last row
    seq.checkpoint();
    const seven = await seq.append([7]);
    close(seven.previousHidden, row(prompt.length - 1)); // one token: the last append's last row
    const span = await seq.append([8, 9]);
    close(span.previousHidden, row(prompt.length + 1));
    seq.rollback();
    const again = await seq.append([7]);
    close(again.previousHidden, row(prompt.length - 1)); // restored with the cache
    seq.dispose();
  });

  test('rollback returns the cache to the checkpoint exactly; commit keeps what came after', async () => {
    const prompt = tokenizer.encode(PROMPTS[0]!, { addBos: true });
    const reference = edge.newSequence();
    await reference.append(prompt);
    const expected = await reference.append([42]);
    reference.dispose();

    const seq = edge.newSequence();
    await seq.append(prompt);
    seq.checkpoint();
    await seq.append([7]);
    await seq.append([8]);
    seq.rollback();
    expect(seq.tokens).toEqual(prompt);
    const again = await seq.append([42]);
    expect(Array.from(again.logits)).toEqual(Array.from(expected.logits));
    expect(() => seq.rollback()).toThrow('has no checkpoint');

    seq.checkpoint();
    await seq.append([9]);
    seq.commit();
    expect(seq.tokens).toEqual([...prompt, 42, 9]);
    seq.dispose();
    expect(edge.stats.liveSequences).toBe(0);
  });

  test('two checkpoints: commit keeps the oldest’s chain up to the newer one, which can still be rolled back to; rollback with both returns to the oldest', async () => {
    const prompt = tokenizer.encode(PROMPTS[0]!, { addBos: true });
    const reference = edge.newSequence();
    await reference.append(prompt);
    await reference.append([7]);
    const afterSeven = await reference.append([42]);
    reference.dispose();

    const seq = edge.newSequence();
    await seq.append(prompt);
    seq.checkpoint();
    await seq.append([7]);
    seq.checkpoint();
    expect(() => seq.checkpoint()).toThrow('already holds 2 checkpoints');
    await seq.append([8]);
    seq.commit();
    expect(seq.checkpoints).toBe(1);
    seq.rollback();
    expect(seq.tokens).toEqual([...prompt, 7]);
    expect(Array.from((await seq.append([42])).logits)).toEqual(Array.from(afterSeven.logits));

    seq.checkpoint();
    await seq.append([9]);
    seq.checkpoint();
    await seq.append([10]);
    seq.rollback();
    expect(seq.checkpoints).toBe(0);
    expect(seq.tokens).toEqual([...prompt, 7, 42]);
    seq.dispose();
    expect(edge.stats.liveSequences).toBe(0);
  });
});
