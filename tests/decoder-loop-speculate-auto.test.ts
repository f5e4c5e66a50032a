import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { CloudClient } from '../src/edge/cloud/cloud-client.ts';
import { generate, type DoneEvent, type EdgeEngine, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { SpeculationPolicy } from '../src/edge/loop/speculation/speculation-policy.ts';
import { edgeEcho, late } from './helpers/scripted-clouds.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';

const PROMPTS = [
  'Once upon a time, there was a little dog',
  'Lily went to the park',
  'The sun was hot and',
  'Tom had a big red ball. One day',
  'Mom said',
  'There was a tree',
];
const router = new TopProbabilityScorer();

let pair: DemoPairModels;
beforeAll(async () => (pair = await loadDemoPairModels({ record: false })));
afterAll(() => pair.release());

const echo = (offset: number, delayMs: number) => edgeEcho(pair.edge, pair.tokenizer, offset, delayMs);

async function run(engine: EdgeEngine, raw: RawGenerationRequest) {
  const tokens: TokenEvent[] = [];
  let done: DoneEvent | undefined;
  for await (const e of generate(
    engine,
    parseGenerationRequest({ prompt: PROMPTS[0], mode: 'joint', maxNewTokens: 24, ...raw }, undefined, 0.5, engine.speculation?.byDefault),
  )) {
    if (e.type === 'token') tokens.push(e);
    else done = e;
  }
  return { decisions: tokens.map((t) => `${t.id}:${t.source}:${t.score}`), done: done! };
}

describe('speculate auto', () => {
  test('the same tokens, sources and scores as on and off, on many prompts; it decodes ahead at some positions and waits at others', async () => {
    // A prior that starts it on: the demo pair's misses then turn it off.
    const engine: EdgeEngine = {
      edgeModel: pair.edge,
      router,
      tokenizer: pair.tokenizer,
      cloud: late(pair.cloud, 5),
      speculation: { byDefault: 'auto', policy: new SpeculationPolicy({ priorHitRate: 0.9 }) },
    };
    const totals = { ahead: 0, waited: 0 };
    for (const prompt of PROMPTS) {
      for (const threshold of [0.6, 0.9]) {
        const auto = await run(engine, { prompt, threshold });
        const off = await run(engine, { prompt, threshold, speculate: false });
        const on = await run(engine, { prompt, threshold, speculate: true });
        expect(auto.decisions).toEqual(off.decisions);
        expect(on.decisions).toEqual(off.decisions);
        expect(auto.done.text).toBe(off.done.text);
        expect([auto.done.metrics.speculateSetting, off.done.metrics.speculateSetting, on.done.metrics.speculateSetting]).toEqual(['auto', 'off', 'on']);
        expect(on.done.metrics.speculationDecisions).toEqual({ ahead: 0, waited: 0 });
        const { ahead, waited } = auto.done.metrics.speculationDecisions;
        // Chains open only where it decided to decode ahead (conditional steps may add chains behind them).
        if (ahead === 0) expect(auto.done.metrics.speculated).toBe(0);
        totals.ahead += ahead;
        totals.waited += waited;
      }
    }
    expect(totals.ahead).toBeGreaterThan(0);
    expect(totals.waited).toBeGreaterThan(0);
  }, 120_000);

  test('it turns itself off after misses and on again when hits come; the decision and its figures are in the done metrics', async () => {
    const settings = { byDefault: 'auto' as const, policy: new SpeculationPolicy() };
    const engine = (cloud: CloudClient): EdgeEngine => ({ edgeModel: pair.edge, router, tokenizer: pair.tokenizer, cloud, speculation: settings });
    const agreeing = echo(0, 20);
    const disagreeing = echo(1, 20);

    // The prior (0.3) waits; the first reply measures the round trip, and hits turn it on within the generation.
    const first = await run(engine(agreeing), { threshold: 0.9 });
    const { ahead, waited } = first.done.metrics.speculationDecisions;
    expect(waited).toBeGreaterThan(0);
    expect(ahead).toBeGreaterThan(0);
    expect(first.done.metrics.speculationHits).toBe(first.done.metrics.speculated);
    const figures = first.done.metrics.speculationFigures!;
    expect(figures.hitRate).toBeGreaterThan(0.5);
    expect(figures.roundTripMs).toBeGreaterThanOrEqual(20);
    expect(figures.stepMs).toBeGreaterThan(0);
    expect(figures.savingMs).toBeGreaterThan(figures.costMs);

    // A cloud whose every token differs from the guess: within a few routed positions it stops decoding ahead.
    let off: Awaited<ReturnType<typeof run>> | undefined;
    for (let i = 0; i < 3 && !off; i++) {
      const r = await run(engine(disagreeing), { prompt: PROMPTS[i + 1], threshold: 0.9 });
      if (r.done.metrics.speculationDecisions.ahead === 0 && r.done.metrics.speculationDecisions.waited > 0) off = r;
    }
    expect(off).toBeDefined();
    expect(off!.done.metrics.speculationFigures!.hitRate).toBeLessThan(0.5);
    expect(off!.done.metrics.wastedSteps).toBe(0);

    // Waiting, it still compares each reply with the guess: agreeing replies turn it on again.
    let on: Awaited<ReturnType<typeof run>> | undefined;
    for (let i = 0; i < 3 && !on; i++) {
      const r = await run(engine(agreeing), { prompt: PROMPTS[i + 3], threshold: 0.9 });
      if (r.done.metrics.speculationDecisions.ahead > 0) on = r;
    }
    expect(on).toBeDefined();
    expect(on!.done.metrics.speculationHits).toBeGreaterThan(0);
  }, 120_000);
});
