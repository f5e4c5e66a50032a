/**
 * Budgets in the decoding loop, on the demo pair with an in-process cloud: a fixed τ decides exactly as a
 * reference loop that routes below τ; a share budget holds its band over every 200-token window, repeats
 * exactly, and decodes the same tokens with speculation as without; a token budget is a hard cap; a wait
 * budget stops routing when the cloud is slower than it; an overloaded refusal is decided on the edge.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BoxRouting } from '../src/edge/routing/box-routing.ts';
import { interceptSteps, type CloudStepReply } from '../src/edge/cloud/cloud-client.ts';
import { generate, type DoneEvent, type EdgeEngine, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer, type Router } from '../src/edge/routing/router.ts';
import { argmax, topProbability } from '../src/shared/model/logits.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';

const LIMITS = { maxPromptChars: 200, maxNewTokens: 480, maxRouteSpan: 4 };
const PROMPTS = ['Once upon a time, there was a little dog', 'The sun was hot and the'];
let pair: DemoPairModels;

beforeAll(async () => (pair = await loadDemoPairModels()));
afterAll(() => pair.release());

function engine(overrides: Partial<EdgeEngine> = {}): EdgeEngine {
  return { edgeModel: pair.edge, router: new TopProbabilityScorer(), tokenizer: pair.tokenizer, cloud: pair.cloud, ...overrides };
}

async function run(raw: RawGenerationRequest, eng = engine()) {
  const tokens: TokenEvent[] = [];
  let done: DoneEvent | undefined;
  for await (const e of generate(eng, parseGenerationRequest({ prompt: PROMPTS[0], ...raw }, LIMITS))) {
    if (e.type === 'token') tokens.push(e);
    else done = e;
  }
  return { tokens, done: done!, ids: tokens.map((t) => t.id) };
}

/** The rule before budgets, written out: greedy edge model; below τ, the cloud model's greedy token. */
async function referenceLoop(prompt: string, threshold: number, count: number) {
  const ids = pair.tokenizer.encode(prompt, { addBos: true });
  const edge = pair.edge.newSequence();
  const cloud = pair.cloudModel.newSequence();
  let edgeOut = await edge.append(ids);
  let cloudOut = await cloud.append(ids);
  const out: { id: number; source: TokenEvent['source'] }[] = [];
  while (out.length < count) {
    const routed = topProbability(edgeOut.logits) < threshold;
    const id = argmax(routed ? cloudOut.logits : edgeOut.logits);
    if (id === 1 || id === 2) break;
    out.push({ id, source: routed ? 'llm' : 'slm' });
    edgeOut = await edge.append([id]);
    cloudOut = await cloud.append([id]);
  }
  edge.dispose();
  cloud.dispose();
  return out;
}

/** Routed share of every `size`-token window starting after `skip` tokens. */
function windowShares(tokens: TokenEvent[], size: number, skip: number): number[] {
  const routed: number[] = tokens.map((t) => (t.source === 'llm' || t.source === 'fallback' ? 1 : 0));
  const shares: number[] = [];
  for (let start = skip; start + size <= routed.length; start++) shares.push(routed.slice(start, start + size).reduce((a, b) => a + b, 0) / size);
  return shares;
}

describe('a fixed τ', () => {
  for (const prompt of PROMPTS) {
    for (const threshold of [0.3, 0.6]) {
      test(`decides exactly as the rule before budgets: τ ${threshold}, "${prompt.slice(0, 12)}…"`, async () => {
        const expected = await referenceLoop(prompt, threshold, 60);
        const plain = await run({ prompt, threshold, maxNewTokens: 60 });
        expect(plain.tokens.map((t) => ({ id: t.id, source: t.source }))).toEqual(expected);
        expect(plain.done.metrics.budget).toMatchObject({ policy: 'threshold', cut: threshold, meanCut: threshold, decided: 60 });
        const speculated = await run({ prompt, threshold, maxNewTokens: 60, speculate: true }, engine({ cloud: slowCloud(5) }));
        expect(speculated.ids).toEqual(plain.ids);
      });
    }
  }
});

/** The in-process cloud with every step held `ms` first, so speculation decodes ahead. */
function slowCloud(ms: number) {
  return interceptSteps(pair.cloud, async (request, next) => (await Bun.sleep(ms), next(request)));
}

describe('a share budget', () => {
  test('holds 0.10 ± 0.02 over every 200-token window after the first 50, and repeats exactly', async () => {
    for (const prompt of PROMPTS) {
      const first = await run({ prompt, routeShare: 0.1, maxNewTokens: 480 });
      // Greedy text from onnxruntime's floats: another CPU may flip a near-tie and end the story sooner, so
      // the test asks for enough text to hold many full windows rather than for all 480 tokens.
      expect(first.tokens.length).toBeGreaterThanOrEqual(350);
      const shares = windowShares(first.tokens, 200, 50);
      expect(shares.length).toBe(first.tokens.length - 250 + 1);
      expect(Math.min(...shares)).toBeGreaterThanOrEqual(0.08);
      expect(Math.max(...shares)).toBeLessThanOrEqual(0.12);
      expect(first.done.metrics.budget).toMatchObject({ policy: 'share', share: 0.1, decided: first.tokens.length });
      expect(first.done.metrics.budget.realizedShare).toBeCloseTo(first.done.metrics.routedRatio, 10);
      const again = await run({ prompt, routeShare: 0.1, maxNewTokens: 480 });
      expect(again.ids).toEqual(first.ids);
    }
  });

  test('speculation decodes ahead with a fork of the cut: the same tokens and sources as without', async () => {
    const plain = await run({ routeShare: 0.2, maxNewTokens: 160 });
    const speculated = await run({ routeShare: 0.2, maxNewTokens: 160, speculate: true }, engine({ cloud: slowCloud(8), speculation: { depth: 6 } }));
    expect(speculated.done.metrics.speculated).toBeGreaterThan(0);
    expect(speculated.tokens.map((t) => [t.id, t.source])).toEqual(plain.tokens.map((t) => [t.id, t.source]));
  });

  test('the edge settings apply only to requests that name neither τ nor a budget', () => {
    const defaults = { routeShare: 0.1, routeWaitMs: 300 };
    expect(parseGenerationRequest({ prompt: 'x' }, LIMITS, 0.5, false, defaults)).toMatchObject(defaults);
    const named = parseGenerationRequest({ prompt: 'x', threshold: 0.4 }, LIMITS, 0.5, false, defaults);
    expect(named.routeShare).toBeUndefined();
    expect(named.routeWaitMs).toBeUndefined();
    expect(parseGenerationRequest({ prompt: 'x', routeWaitMs: 50 }, LIMITS, 0.5, false, defaults)).toMatchObject({ routeWaitMs: 50 });
  });
});

test("a token budget is a hard cap over every minute, spread over the box's tokens rather than spent at once", async () => {
  // A router stand-in that takes a second per position on the box's clock, with scores that vary.
  const clock = { t: 0 };
  let seed = 11;
  const router: Router = {
    info: { name: 'test:clocked', hiddenSize: null, defaultThreshold: 0.5 },
    score: async () => ((clock.t += 1_000), (seed = (seed * 48271) % 2147483647) / 2147483647),
    release: async () => {},
  };
  const eng = engine({ router, routing: new BoxRouting({}, () => clock.t) });
  const cloudAt: number[] = [];
  for await (const e of generate(eng, parseGenerationRequest({ prompt: PROMPTS[0], routeTokensPerMinute: 7, routeSpan: 4, maxNewTokens: 150 }, LIMITS))) {
    if (e.type === 'token' && e.source === 'llm') cloudAt.push(clock.t);
    if (e.type === 'done') expect(e.metrics.budget).toMatchObject({ policy: 'tokens', tokensPerMinute: 7 });
  }
  for (const at of cloudAt) expect(cloudAt.filter((t) => t > at - 60_000 && t <= at).length).toBeLessThanOrEqual(7);
  // A position a second for over two minutes: the budget is used, not starved.
  expect(clock.t).toBeGreaterThan(120_000);
  expect(cloudAt.length).toBeGreaterThanOrEqual(10);
  expect(cloudAt[6]! - cloudAt[0]!).toBeGreaterThan(10_000); // spread, not the first seven positions
});

test('a wait budget routes while the cloud answers within it and stops once it does not', async () => {
  const fast = await run({ threshold: 0.6, routeWaitMs: 2_000, maxNewTokens: 48 });
  const fixed = await run({ threshold: 0.6, maxNewTokens: 48 });
  expect(fast.ids).toEqual(fixed.ids); // nothing congested: the cut is τ
  const slow = await run({ threshold: 0.6, routeWaitMs: 20, maxNewTokens: 48 }, engine({ cloud: slowCloud(60) }));
  expect(slow.done.metrics.budget.routedPositions).toBe(1); // the first step measured 60 ms: none after it
  expect(slow.done.metrics.budget.expectedWaitMs).toBeGreaterThanOrEqual(60);
  expect(slow.done.metrics.budget.cut).toBe(0);
});

test('an overloaded refusal is decided on the edge, counted, and not a failure of the generation', async () => {
  const overloaded: CloudStepReply = {
    tokens: [],
    text: '',
    logprobs: [],
    topAlternatives: [],
    cachedTokens: 0,
    backendMs: 0,
    shimMs: 0,
    overloaded: true,
    load: { stepsInFlight: 8, stepsQueued: 30, backendMs: 40 },
  };
  const refusing = interceptSteps(pair.cloud, async () => overloaded);
  const { tokens, done } = await run({ threshold: 0.6, maxNewTokens: 30 }, engine({ cloud: refusing }));
  const small = await run({ mode: 'small_only', maxNewTokens: 30 });
  expect(tokens.map((t) => t.id)).toEqual(small.ids);
  const refused = tokens.filter((t) => t.source === 'fallback');
  expect(refused.length).toBeGreaterThan(0);
  expect(refused[0]!.cloudError).toContain('overloaded');
  expect(done.finishReason).toBe('length');
  expect(done.metrics.budget.overloaded).toBe(refused.length);
});
