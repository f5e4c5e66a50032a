/**
 * The decoding loop's accounting: the final metrics agree with the token events they summarize, cloud
 * waiting stays out of the edge's time between tokens, route spans are fed to the edge cache in one pass
 * each, and the context window ends a generation cleanly.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { interceptSteps, type CloudClient } from '../src/edge/cloud/cloud-client.ts';
import { generate, type DoneEvent, type EdgeEngine, type GenerationEvent, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';
import type { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';

let edge: DecoderModel;
let cloudModel: DecoderModel;
let tokenizer: TextTokenizer;
let cloud: InProcessCloud;
const PROMPT = 'Once upon a time, there was a little dog';

let pair: DemoPairModels;
beforeAll(async () => {
  pair = await loadDemoPairModels({ record: false });
  ({ edge, cloudModel, tokenizer, cloud } = pair);
});

afterAll(() => pair.release());

function engine(overrides: Partial<EdgeEngine> = {}): EdgeEngine {
  return { edgeModel: edge, router: new TopProbabilityScorer(), tokenizer, cloud, ...overrides };
}

async function run(raw: RawGenerationRequest, eng = engine()) {
  const events: GenerationEvent[] = [];
  for await (const e of generate(eng, parseGenerationRequest({ prompt: PROMPT, ...raw }))) events.push(e);
  const tokens = events.filter((e): e is TokenEvent => e.type === 'token');
  const done = events.at(-1) as DoneEvent;
  expect(done.type).toBe('done');
  return { tokens, done };
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** The in-process cloud behind a fixed delay per step: a network round trip the edge must not count as its own time. */
function delayedCloud(delayMs: number): CloudClient {
  return interceptSteps(cloud, async (request, next) => {
    await Bun.sleep(delayMs);
    return next(request);
  });
}

describe('final metrics', () => {
  test('the totals are the sums of the per-token timings, and the counts are those of the events', async () => {
    // Without speculation: with it, edge work overlaps the cloud's and the times no longer add up to the total.
    const { tokens, done } = await run({ mode: 'joint', threshold: 0.6, maxNewTokens: 32, speculate: false });
    const m = done.metrics;
    expect(m.tokens).toBe(tokens.length);
    expect(m.promptTokens).toBe(tokenizer.encode(PROMPT, { addBos: true }).length);
    expect(m.routed).toBe(tokens.filter((t) => t.source === 'llm').length);
    expect(m.fallback).toBe(0);
    expect(m.routedRatio).toBeCloseTo(m.routed / m.tokens, 12);
    // Every edge forward pass is attributed to exactly one token (the last token's logits need no further pass).
    expect(m.slmMs).toBeCloseTo(sum(tokens.map((t) => t.timings.slmMs)), 6);
    expect(m.routerMs).toBeCloseTo(sum(tokens.map((t) => t.timings.routerMs)), 6);
    expect(m.cloudMs).toBeCloseTo(sum(tokens.map((t) => t.timings.cloudMs)), 6);
    expect(tokens.filter((t) => t.source === 'slm').every((t) => t.timings.cloudMs === 0)).toBe(true);
    // Orderings that hold whatever the machine's speed.
    expect(m.prefillMs).toBeGreaterThan(0);
    expect(m.prefillMs).toBeLessThanOrEqual(m.slmMs);
    expect(m.ttftMs).toBeGreaterThanOrEqual(m.prefillMs);
    expect(m.totalMs).toBeGreaterThanOrEqual(m.ttftMs);
    expect(m.totalMs).toBeGreaterThanOrEqual(m.slmMs + m.routerMs + m.cloudMs);
    expect(m.tbtP50Ms).toBeGreaterThan(0);
    expect(m.tbtP50Ms).toBeLessThanOrEqual(m.tbtP95Ms);
  });

  test('cloud waiting is counted as communication + cloud model time, never as the edge time between tokens', async () => {
    const delayMs = 150;
    const { tokens, done } = await run({ mode: 'joint', threshold: 0.6, maxNewTokens: 12 }, engine({ cloud: delayedCloud(delayMs) }));
    const m = done.metrics;
    expect(m.routed).toBeGreaterThanOrEqual(2);
    // Each routed step waited at least the delay ...
    expect(m.cloudMs).toBeGreaterThanOrEqual(m.routed * (delayMs - 1));
    for (const t of tokens.filter((t) => t.source === 'llm')) expect(t.timings.cloudMs).toBeGreaterThanOrEqual(delayMs - 1);
    // ... and none of it is in TBT: counted there, the routed steps after the first token alone would add
    // (routed - 1) × delay to the sum of the edge steps.
    expect(m.tbtMeanMs * (m.tokens - 1)).toBeLessThan((m.routed - 1) * delayMs);
    // TTFT and the total do include the cloud: they are what the user waits for.
    expect(m.totalMs).toBeGreaterThanOrEqual(m.cloudMs);
  });
});

describe('route spans in joint mode', () => {
  test('each span costs one edge pass however many tokens it brings, and one router call', async () => {
    const runs = edge.stats.runs;
    const fed = edge.stats.tokensFed;
    const { tokens, done } = await run({ mode: 'joint', threshold: 1, maxNewTokens: 12, routeSpan: 4 });
    expect(tokens).toHaveLength(12);
    expect(tokens.every((t) => t.source === 'llm')).toBe(true);
    expect(tokens.map((t) => (t.score === null ? '-' : 'r')).join('')).toBe('r---r---r---');
    // Prefill, then one pass per span except the last (nothing follows it): 2 passes feeding 4 tokens each.
    expect(edge.stats.runs - runs).toBe(1 + 2);
    expect(edge.stats.tokensFed - fed).toBe(done.metrics.promptTokens + 8);
  });
});

describe('the context window', () => {
  const maxPositions = () => edge.pack.maxPositions;

  /** A prompt of exactly `count` tokens (BOS included) under the edge tokenizer. */
  function promptOfLength(count: number): string {
    const words: string[] = [];
    while (tokenizer.encode(words.join(' '), { addBos: true }).length < count) words.push('dog');
    while (tokenizer.encode(words.join(' '), { addBos: true }).length > count) words.pop();
    const text = words.join(' ');
    expect(tokenizer.encode(text, { addBos: true }).length).toBe(count);
    return text;
  }

  test('a generation that reaches the window ends with finish reason context, having filled it exactly', async () => {
    const promptTokens = maxPositions() - 5;
    const { tokens, done } = await run({ prompt: promptOfLength(promptTokens), mode: 'joint', threshold: 0.6, maxNewTokens: 50 });
    expect(done.finishReason).toBe('context');
    expect(tokens).toHaveLength(5);
    expect(edge.stats.liveSequences).toBe(0);
  });

  test('a route span never overruns the window', async () => {
    const promptTokens = maxPositions() - 3;
    const { tokens, done } = await run({ prompt: promptOfLength(promptTokens), mode: 'llm_only', maxNewTokens: 50, routeSpan: 8 });
    expect(done.finishReason).toBe('context');
    expect(tokens).toHaveLength(3);
  });

  test('the sequence refuses to grow past the window with OUT_OF_RANGE, and keeps its cache', async () => {
    const sequence = edge.newSequence();
    try {
      await sequence.append(Array.from({ length: maxPositions() - 1 }, () => 100));
      const error = await sequence.append([100, 101]).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'OUT_OF_RANGE' });
      expect((error as Error).message).toContain(`> ${maxPositions()} (model limit)`);
      expect(sequence.length).toBe(maxPositions() - 1);
      const last = await sequence.append([100]);
      expect(last.logits.length).toBe(edge.pack.vocabSize);
    } finally {
      sequence.dispose();
    }
  });
});

describe('the generated text', () => {
  test('continues the prompt: a first token that starts a word keeps its space', async () => {
    // The cloud model continues this prompt with " named" (greedy): a word, not punctuation.
    const prompt = 'Once upon a time, there was a little dog';
    const { tokens, done } = await run({ prompt, mode: 'llm_only', maxNewTokens: 3 });
    expect(tokenizer.decode([tokens[0]!.id])).toBe('named');
    expect(tokens[0]!.text).toBe(' named');
    expect(done.text.startsWith(' named')).toBe(true);
    expect(done.text).toBe(tokens.map((t) => t.text).join(''));
  });
});
