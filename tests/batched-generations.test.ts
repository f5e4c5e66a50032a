/**
 * Generations batched on one edge model (its engine's DecodeScheduler) against the same generations
 * run one at a time on an unbatched one, the demo edge model in both layouts: routing on, speculation on (guesses kept and thrown away, so
 * checkpoints and rollbacks run inside batches), prompts of different lengths starting at different
 * times, one cancelled midway. Greedy: every token and source is identical, and each router score agrees
 * within SCORE_TOLERANCE (the plain layout's batched logits differ from the lone ones in the last bits:
 * batched-decoding.test.ts).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate, type DoneEvent, type EdgeEngine, type GenerationEvent, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { parseGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { DEMO } from '../src/shared/paths.ts';
import { convertLlama2c } from '../src/tools/models/convert-llama2c.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';
import { late } from './helpers/scripted-clouds.ts';

const PROMPTS = [
  'Once upon a time, there was a little dog',
  'Lily went to the park',
  'The sun was hot and',
  'Tom had a big red ball. One day, he went outside to play with his friends in the garden near the house',
  'Mom said',
  'There was a tree',
];
/** Largest |Δ| between a router score batched and alone; the measured one is printed (about 1e-7 here). */
const SCORE_TOLERANCE = 1e-5;
/** The generation cancelled after this many tokens. */
const CANCELLED = 2;
const CANCEL_AFTER = 6;

let pair: DemoPairModels;
/** The demo edge model, alone and batched: as the demo builds it (plain layout), and converted to the fused layout. */
const edges: Record<'plain' | 'fused', { alone: DecoderModel; batched: DecoderModel; scheduler: DecodeScheduler }> = {} as never;
const work = mkdtempSync(join(tmpdir(), 'batched-generations-'));
beforeAll(async () => {
  pair = await loadDemoPairModels({ record: false });
  const fusedPack = join(work, 'edge-fused');
  await convertLlama2c({ checkpoint: DEMO.edgeCheckpoint, tokenizer: DEMO.tokenizer, out: fusedPack, layout: 'fused' });
  const batched = async (dir: string) => {
    const model = await DecoderModel.load(loadModelPack(dir));
    return { batched: model, scheduler: DecodeScheduler.over(model, { maxBatch: 4 })! };
  };
  edges.plain = { alone: pair.edge, ...(await batched(pair.edge.pack.dir)) };
  edges.fused = { alone: await DecoderModel.load(loadModelPack(fusedPack)), ...(await batched(fusedPack)) };
});
afterAll(async () => {
  await pair.release();
  for (const model of [edges.plain.batched, edges.fused.alone, edges.fused.batched]) await model.release();
  rmSync(work, { recursive: true, force: true });
});

async function run(edgeModel: DecoderModel, prompt: string, startAfterMs: number, cancelAfter?: number, scheduler?: DecodeScheduler) {
  await Bun.sleep(startAfterMs);
  const engine: EdgeEngine = { edgeModel, scheduler, router: new TopProbabilityScorer(), tokenizer: pair.tokenizer, cloud: late(pair.cloud, 3) };
  const request = parseGenerationRequest({ prompt, mode: 'joint', threshold: 0.6, maxNewTokens: 24, speculate: true });
  const abort = new AbortController();
  const events: GenerationEvent[] = [];
  for await (const e of generate(engine, request, abort.signal)) {
    events.push(e);
    if (e.type === 'token' && events.length === cancelAfter) abort.abort();
  }
  const tokens = events.filter((e): e is TokenEvent => e.type === 'token');
  return { decisions: tokens.map((t) => `${t.id}:${t.source}`), scores: tokens.map((t) => t.score), done: events.at(-1) as DoneEvent };
}

test.each(['plain', 'fused'] as const)(
  '%s layout: batched generations emit what each emits alone (routing, speculation, one cancelled)',
  async (layout) => {
    const { alone: aloneEdge, batched: batchedEdge, scheduler } = edges[layout];
    const alone: Awaited<ReturnType<typeof run>>[] = [];
    for (const prompt of PROMPTS) alone.push(await run(aloneEdge, prompt, 0));
    const batched = await Promise.all(PROMPTS.map((prompt, i) => run(batchedEdge, prompt, i * 15, i === CANCELLED ? CANCEL_AFTER : undefined, scheduler)));
    let worstScore = 0;
    batched.forEach((b, i) => {
      b.scores.forEach((s, k) => {
        const reference = alone[i]!.scores[k];
        expect(s === null).toBe(reference === null);
        if (s !== null && reference !== null && reference !== undefined) worstScore = Math.max(worstScore, Math.abs(s - reference));
      });
      if (i === CANCELLED) {
        expect(b.done.finishReason).toBe('cancelled');
        expect(b.decisions).toEqual(alone[i]!.decisions.slice(0, b.decisions.length));
      } else {
        expect(b.decisions).toEqual(alone[i]!.decisions);
        expect(b.done.text).toBe(alone[i]!.done.text);
      }
      expect(alone[i]!.done.metrics.meanBatchSize).toBe(1);
    });
    console.log(`router scores batched vs alone: max |Δ| ${worstScore.toExponential(2)}`);
    expect(worstScore).toBeLessThan(SCORE_TOLERANCE);
    // Routing and speculation did run, and the steps were shared.
    expect(alone.reduce((n, a) => n + a.done.metrics.routed, 0)).toBeGreaterThan(0);
    expect(alone.reduce((n, a) => n + a.done.metrics.wastedSteps, 0)).toBeGreaterThan(0);
    expect(batched.reduce((n, b) => n + b.done.metrics.speculated, 0)).toBeGreaterThan(0);
    expect(Math.max(...batched.map((b) => b.done.metrics.meanBatchSize))).toBeGreaterThan(1.5);
    expect(scheduler.stats.sizes.slice(2).some((n) => n > 0)).toBe(true);
    expect(batchedEdge.stats.liveSequences).toBe(0);
    // The fused layout keeps its batch buffers from pass to pass, copying in the rows that rollbacks and
    // newcomers changed; the plain layout gathers every pass.
    const { keptBuffersReused, keptRowsCopied } = scheduler.stats;
    if (layout === 'fused') expect(Math.min(keptBuffersReused, keptRowsCopied)).toBeGreaterThan(0);
    else expect(keptBuffersReused + keptRowsCopied).toBe(0);
  },
  120_000,
);

test("the cloud's embedded backend batches concurrent sessions' spans: the same ids as one at a time", async () => {
  const options = { modelPack: pair.cloudModel.pack.dir, maxLiveSequences: 8 };
  const alone = await EmbeddedBackend.load(options);
  const batched = await EmbeddedBackend.load({ ...options, maxBatch: 4 });
  try {
    const contexts = PROMPTS.slice(0, 4).map((p) => pair.tokenizer.encode(p, { addBos: true, parseSpecialTokens: false }));
    const step = (backend: EmbeddedBackend, context: number[], i: number) =>
      backend.openSequence().step({
        context,
        maxTokens: 12,
        sampling: { temperature: 0, topP: 1, seed: undefined, stopTokenIds: [], topLogprobs: 0 },
        requestId: `r${i}`,
        signal: new AbortController().signal,
      });
    const reference: number[][] = [];
    for (const [i, context] of contexts.entries()) reference.push((await step(alone, context, i)).ids);
    const together = await Promise.all(contexts.map((context, i) => step(batched, context, i)));
    expect(together.map((r) => r.ids)).toEqual(reference);
    const { sizes } = batched.scheduler!.stats;
    expect(sizes.slice(2).reduce((a, b) => a + (b ?? 0), 0)).toBeGreaterThan(0);
  } finally {
    await alone.close();
    await batched.close();
  }
}, 60_000);

test("the embedded backend's steps that append the edge's tokens since the last step share passes too (appendTokens): the same ids as one at a time", async () => {
  const options = { modelPack: pair.cloudModel.pack.dir, maxLiveSequences: 8 };
  const alone = await EmbeddedBackend.load(options);
  const batched = await EmbeddedBackend.load({ ...options, maxBatch: 4, appendTokens: 16 });
  try {
    const prompts = PROMPTS.slice(0, 4).map((p) => pair.tokenizer.encode(p, { addBos: true, parseSpecialTokens: false }));
    const sampling = { temperature: 0, topP: 1, seed: undefined, stopTokenIds: [], topLogprobs: 0 };
    /** Six routed steps per session: each appends the cloud's token and 2 to 11 of the edge's (ids of the session's own prompt). */
    async function sessions(backend: EmbeddedBackend): Promise<number[][]> {
      const sequences = prompts.map(() => backend.openSequence());
      const contexts = prompts.map((p) => [...p]);
      const ids: number[][] = prompts.map(() => []);
      for (let round = 0; round < 6; round++) {
        const step = (i: number) =>
          sequences[i]!.step({ context: contexts[i]!, maxTokens: 1, sampling, requestId: `s${i}-${round}`, signal: new AbortController().signal });
        const results: { ids: number[] }[] = [];
        if (backend === alone) for (let i = 0; i < prompts.length; i++) results.push(await step(i));
        else results.push(...(await Promise.all(prompts.map((_, i) => step(i)))));
        results.forEach((r, i) => {
          ids[i]!.push(...r.ids);
          const edge = prompts[i]!.slice(1, 1 + 2 + ((round * 3 + i) % 10));
          contexts[i]!.push(...r.ids, ...edge);
        });
      }
      for (const s of sequences) s.dispose();
      return ids;
    }
    const reference = await sessions(alone);
    expect(await sessions(batched)).toEqual(reference);
    // Every step after the first appends 3 to 12 tokens: passes of several rows can only be those appends.
    const { sizes } = batched.scheduler!.stats;
    expect(sizes.slice(2).reduce((a, b) => a + (b ?? 0), 0)).toBeGreaterThanOrEqual(4);
  } finally {
    await alone.close();
    await batched.close();
  }
}, 60_000);
