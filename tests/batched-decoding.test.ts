/**
 * Batched decode steps (scheduler/decode-scheduler.ts, batched-step.ts) against the same sequences run alone: many
 * prompts of different lengths, joining at different steps, greedy; the same ids, logits within
 * LOGIT_TOLERANCE. On the demo packs (plain layout, from llama2.c) and a tiny random Qwen pack built in
 * both layouts. Checkpoints, rollbacks and disposal mid-batch keep working per sequence.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AppendableSequence, type AppendResult, DecoderModel } from '../src/shared/model/decoder-model.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { MIN_RESTORED_TOKENS, PrefixCache } from '../src/shared/model/prefix-cache.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { quantizePack } from '../src/tools/models/quantize.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { makeHubExportPacks, VARIANTS, type HubExportPacks } from './helpers/hub-export-packs.ts';
import { maxAbsDiff } from './helpers/max-abs-diff.ts';
import { argmax } from '../src/shared/model/logits.ts';

/**
 * Largest |Δ| allowed between a row's logits batched and alone. Batching changes the shapes the kernels
 * see (matrix products of B rows instead of one, softmax over padded rows), hence the order of float32
 * sums; the differences measured on these packs are reported by the test (below 1e-5).
 */
const LOGIT_TOLERANCE = 1e-4;
/**
 * A float16 export keeps its cache in float16 between passes, so a prompt fed in two pieces (cut by the
 * prompts it arrived with, as a prompt longer than a piece is cut alone too) differs from the same
 * prompt in one piece by float16 roundings: measured here 4.9e-4 in the hidden states and 7.8e-3 in the
 * logits, one float16 step at their magnitudes (near 1, and 8 to 16). Two such steps of the logits.
 */
const FLOAT16_TOLERANCE = 2 ** -6;
const STEPS = 24;

const work = mkdtempSync(join(tmpdir(), 'batched-decoding-'));
/** tiny-qwen2 in the plain layout, the fused one, and the fused one with decode steps through standard ops (decoder-graph-attention.ts). */
const LAYOUTS = ['plain', 'fused', 'fused-matmul'] as const;
const QWEN = { plain: join(work, 'plain'), fused: join(work, 'fused'), 'fused-matmul': join(work, 'fused-matmul') };
const QWEN_INT8 = { plain: join(work, 'plain-int8'), fused: join(work, 'fused-int8'), 'fused-matmul': join(work, 'fused-matmul-int8') };
let demoEdge: string;
let demoCloud: string;
let hub: HubExportPacks;

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  demoEdge = demo.edgePack;
  demoCloud = demo.cloudPack;
  for (const layout of LAYOUTS) {
    const graph = layout === 'fused-matmul' ? ({ layout: 'fused', decodeAttention: 'matmul' } as const) : { layout };
    await writeRandomPack({ preset: 'tiny-qwen2', out: QWEN[layout], seed: 11, hiddenStatesOutput: true, ...graph });
    await quantizePack({ input: QWEN[layout], output: QWEN_INT8[layout], dtype: 'int8' });
  }
  hub = await makeHubExportPacks();
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  rmSync(hub.root, { recursive: true, force: true });
});

/** Deterministic prompts of lengths 3, 10, 17, ... (ids in [3, vocab)). */
function prompts(count: number, vocab: number): number[][] {
  return Array.from({ length: count }, (_, p) => Array.from({ length: 3 + 7 * p }, (_, i) => 3 + ((p * 131 + i * 17) % (vocab - 3))));
}

interface Trace {
  /** The prompt's append: its logits, hidden and previousHidden are checked too. */
  prefill: AppendResult;
  ids: number[];
  logits: Float32Array[];
  hidden: Float32Array[];
  previousHidden: Float32Array[];
  batchSizes: number[];
}

/** Greedy decoding of `prompt`, starting after `delay` event-loop turns; the sequence is left for the caller to dispose. */
async function greedy(sequence: AppendableSequence, prompt: number[], delay: number): Promise<Trace> {
  for (let i = 0; i < delay; i++) await new Promise((r) => setImmediate(r));
  let out = await sequence.append(prompt);
  const trace: Trace = { prefill: out, ids: [], logits: [], hidden: [], previousHidden: [], batchSizes: [] };
  for (let step = 0; step < STEPS; step++) {
    const id = argmax(out.logits);
    trace.ids.push(id);
    out = await sequence.append([id]);
    trace.logits.push(out.logits);
    trace.hidden.push(out.hidden);
    trace.previousHidden.push(out.previousHidden);
    trace.batchSizes.push(out.batchSize ?? 1);
  }
  return trace;
}

interface CompareOptions {
  prefillChunk?: number;
  modelFile?: string;
  /** Every prompt arrives at once (their first pieces share a pass), instead of each some turns after the one before. */
  together?: boolean;
  /** Largest |Δ| allowed in logits and hidden states; LOGIT_TOLERANCE when omitted. */
  tolerance?: number;
}

async function compareAloneAndBatched(
  packDir: string,
  count: number,
  options: CompareOptions = {},
): Promise<{ worst: number; meanBatch: number; promptsTogether: number; poolReused: number }> {
  const pack = loadModelPack(packDir, options.modelFile);
  const alone = await DecoderModel.load(pack, { threads: 1 });
  const batched = await DecoderModel.load(pack, { threads: 1 });
  const scheduler = DecodeScheduler.over(batched, { maxBatch: 8, prefillChunk: options.prefillChunk })!;
  const tolerance = options.tolerance ?? LOGIT_TOLERANCE;
  try {
    expect(scheduler).toBeInstanceOf(DecodeScheduler);
    const inputs = prompts(count, pack.vocabSize);
    const reference: Trace[] = [];
    for (const prompt of inputs) {
      const seq = alone.newSequence();
      reference.push(await greedy(seq, prompt, 0));
      seq.dispose();
    }
    const seqs = inputs.map(() => scheduler.newSequence());
    // Joining at different steps: each starts some turns after the one before (or all at once).
    const traces = await Promise.all(inputs.map((prompt, p) => greedy(seqs[p]!, prompt, options.together ? 0 : p * 5)));
    for (const s of seqs) s.dispose();
    let worst = 0;
    traces.forEach((trace, p) => {
      expect(trace.ids).toEqual(reference[p]!.ids);
      const [prefill, expected] = [trace.prefill, reference[p]!.prefill];
      worst = Math.max(worst, maxAbsDiff(prefill.logits, expected.logits));
      expect(maxAbsDiff(prefill.hidden, expected.hidden)).toBeLessThan(tolerance);
      expect(maxAbsDiff(prefill.previousHidden, expected.previousHidden)).toBeLessThan(tolerance);
      trace.logits.forEach((l, i) => (worst = Math.max(worst, maxAbsDiff(l, reference[p]!.logits[i]!))));
      trace.hidden.forEach((h, i) => expect(maxAbsDiff(h, reference[p]!.hidden[i]!)).toBeLessThan(tolerance));
      trace.previousHidden.forEach((h, i) => expect(maxAbsDiff(h, reference[p]!.previousHidden[i]!)).toBeLessThan(tolerance));
    });
    expect(worst).toBeLessThan(tolerance);
    const all = traces.flatMap((t) => t.batchSizes);
    const meanBatch = all.reduce((a, b) => a + b, 0) / all.length;
    // The sequences did run together: most steps were in passes of more than one row.
    expect(meanBatch).toBeGreaterThan(2);
    expect(batched.stats.liveSequences).toBe(0);
    return { worst, meanBatch, promptsTogether: scheduler.stats.promptsTogether, poolReused: batched.kvPool.stats.reused };
  } finally {
    await alone.release();
    await batched.release();
  }
}

describe('batched vs alone: the same greedy ids, logits within tolerance', () => {
  test('demo edge pack (plain, llama2.c), 6 prompts joining at different steps', async () => {
    const { worst, meanBatch } = await compareAloneAndBatched(demoEdge, 6);
    console.log(`demo edge: max |Δlogit| ${worst.toExponential(2)}, mean batch ${meanBatch.toFixed(2)}`);
  });
  test('demo cloud pack (plain, 5 layers), prefill in pieces of 8', async () => {
    const { worst, meanBatch } = await compareAloneAndBatched(demoCloud, 6, { prefillChunk: 8 });
    console.log(`demo cloud: max |Δlogit| ${worst.toExponential(2)}, mean batch ${meanBatch.toFixed(2)}`);
  });
  for (const variant of VARIANTS.filter((v) => v !== 'model_quantized.onnx')) {
    test(`Hugging Face export of stories260K (3 layers), ${variant}: left padding honoured by the exported graph`, async () => {
      const { worst, meanBatch, poolReused } = await compareAloneAndBatched(hub.edge, 5, { modelFile: variant });
      console.log(`hub export ${variant}: max |Δlogit| ${worst.toExponential(2)}, mean batch ${meanBatch.toFixed(2)}, ${poolReused} pooled buffers reused`);
      // The batch buffers, float16 caches' included, came from memory earlier passes released.
      expect(poolReused).toBeGreaterThan(0);
    });
  }
  for (const layout of LAYOUTS) {
    test(`tiny-qwen2 ${layout}, 5 prompts`, async () => {
      const { worst, meanBatch } = await compareAloneAndBatched(QWEN[layout], 5);
      console.log(`tiny-qwen2 ${layout}: max |Δlogit| ${worst.toExponential(2)}, mean batch ${meanBatch.toFixed(2)}`);
    });
  }
});

/**
 * Four sequences with caches append chunks of 1, 3, 7 and 12 tokens at once, five rounds, each round
 * rotating who feeds how many, on a model batching appends of up to 16 tokens (`appendTokens`) and on one
 * running each alone: every append's logits, hidden and previous hidden states within `tolerance`.
 * Returns the largest logit difference and how many multi-token appends ran in a shared pass.
 */
async function compareRaggedAppends(packDir: string, modelFile?: string, tolerance = LOGIT_TOLERANCE): Promise<{ worst: number; sharedAppends: number }> {
  const pack = loadModelPack(packDir, modelFile);
  const alone = await DecoderModel.load(pack, { threads: 1 });
  const batched = await DecoderModel.load(pack, { threads: 1 });
  const scheduler = DecodeScheduler.over(batched, { maxBatch: 8, appendTokens: 16 })!;
  try {
    const heads = [5, 12, 20, 9].map((n, s) => Array.from({ length: n }, (_, i) => 3 + ((s * 53 + i * 19) % (pack.vocabSize - 3))));
    const [a, b] = [heads.map(() => alone.newSequence()), heads.map(() => scheduler.newSequence())];
    for (const [i, head] of heads.entries()) {
      await a[i]!.append(head);
      await b[i]!.append(head);
    }
    let worst = 0;
    let sharedAppends = 0;
    const sizes = [1, 3, 7, 12];
    for (let round = 0; round < 5; round++) {
      const chunks = heads.map((_, s) => Array.from({ length: sizes[(s + round) % 4]! }, (_, i) => 3 + ((round * 31 + s * 7 + i * 11) % (pack.vocabSize - 3))));
      const expected: AppendResult[] = [];
      for (const [i, chunk] of chunks.entries()) expected.push(await a[i]!.append(chunk));
      const got = await Promise.all(chunks.map((chunk, i) => b[i]!.append(chunk)));
      got.forEach((g, i) => {
        worst = Math.max(worst, maxAbsDiff(g.logits, expected[i]!.logits));
        expect(maxAbsDiff(g.hidden, expected[i]!.hidden)).toBeLessThan(tolerance);
        expect(maxAbsDiff(g.previousHidden, expected[i]!.previousHidden)).toBeLessThan(tolerance);
        if (chunks[i]!.length > 1 && (g.batchSize ?? 1) > 1) sharedAppends++;
      });
    }
    expect(worst).toBeLessThan(tolerance);
    for (const s of [...a, ...b]) s.dispose();
    return { worst, sharedAppends };
  } finally {
    await alone.release();
    await batched.release();
  }
}

describe('appends of several tokens share decode passes in the plain layout (appendTokens), each row padded before its own tokens', () => {
  test('demo cloud pack (plain, llama2.c): the same logits as each append alone', async () => {
    const { worst, sharedAppends } = await compareRaggedAppends(demoCloud);
    console.log(`demo cloud, ragged appends: max |Δlogit| ${worst.toExponential(2)}, ${sharedAppends} multi-token appends batched`);
    expect(sharedAppends).toBeGreaterThanOrEqual(10);
  });
  test("Hugging Face export of stories260K (3 layers), fp32: padding between a row's cache and its tokens honoured by the exported graph", async () => {
    const { worst, sharedAppends } = await compareRaggedAppends(hub.edge, 'model.onnx');
    console.log(`hub export, ragged appends: max |Δlogit| ${worst.toExponential(2)}, ${sharedAppends} multi-token appends batched`);
    expect(sharedAppends).toBeGreaterThanOrEqual(10);
  });
  test('tiny-qwen2 plain: the same; the fused layout runs such appends alone (GroupQueryAttention takes several positions per row only as first prompts)', async () => {
    const plain = await compareRaggedAppends(QWEN.plain);
    expect(plain.sharedAppends).toBeGreaterThanOrEqual(10);
    const fused = await compareRaggedAppends(QWEN.fused);
    expect(fused.sharedAppends).toBe(0);
  });
});

describe('int8 packs of ours (MatMulNBits bits=8, activations quantized per row and block)', () => {
  for (const layout of LAYOUTS) {
    test(`tiny-qwen2 ${layout} int8: the scheduler takes it; batched and alone give the same ids and logits`, async () => {
      const model = await DecoderModel.load(loadModelPack(QWEN_INT8[layout]), { threads: 1 });
      expect(DecodeScheduler.refusal(model)).toBeUndefined();
      await model.release();
      const { worst, meanBatch } = await compareAloneAndBatched(QWEN_INT8[layout], 5);
      console.log(`tiny-qwen2 ${layout} int8: max |Δlogit| ${worst.toExponential(2)}, mean batch ${meanBatch.toFixed(2)}`);
    });
  }
});

describe('first prompts arriving together share a pass: the same ids, logits within tolerance', () => {
  // Prompts of 3, 10, 17, ... tokens: the pass feeds each the shortest's 3, the rest of each runs alone.
  const cases = [
    ['demo edge pack (plain, llama2.c)', () => demoEdge, {}],
    ['demo cloud pack, pieces of 8: two rows of three tokens, the longer prompts alone', () => demoCloud, { prefillChunk: 8 }],
    ['Hugging Face export of stories260K, fp32', () => hub.edge, { modelFile: 'model.onnx' }],
    ['Hugging Face export of stories260K, fp16 (float16 cache)', () => hub.edge, { modelFile: 'model_fp16.onnx', tolerance: FLOAT16_TOLERANCE }],
    ['tiny-qwen2 plain', () => QWEN.plain, {}],
    ['tiny-qwen2 fused', () => QWEN.fused, {}],
    ['tiny-qwen2 fused int8', () => QWEN_INT8.fused, {}],
    ['tiny-qwen2 fused, decode steps through standard ops, int8', () => QWEN_INT8['fused-matmul'], {}],
  ] as const;
  for (const [name, dir, options] of cases) {
    test(name, async () => {
      const { worst, promptsTogether } = await compareAloneAndBatched(dir(), 6, { ...options, together: true });
      // Six rows of three tokens; with pieces of 8 only the two shortest prompts fit one pass whole.
      expect(promptsTogether).toBe('prefillChunk' in options ? 2 : 6);
      console.log(`${name}, prompts together: max |Δlogit| ${worst.toExponential(2)}, ${promptsTogether} prompts fed together`);
    });
  }
});

describe('the scheduler', () => {
  test("a newcomer's long prefill runs in pieces between the others' steps", async () => {
    const pack = loadModelPack(demoCloud);
    const model = await DecoderModel.load(pack, { threads: 1 });
    const scheduler = DecodeScheduler.over(model, { maxBatch: 4, prefillChunk: 16 })!;
    try {
      const runners = [scheduler.newSequence(), scheduler.newSequence()];
      const steps = [0, 0];
      let stop = false;
      const decoding = runners.map(async (seq, r) => {
        let out = await seq.append([1, 5 + r]);
        while (!stop) {
          out = await seq.append([argmax(out.logits)]);
          steps[r]!++;
        }
      });
      while (steps[0]! < 3) await new Promise((r) => setImmediate(r));
      const newcomer = scheduler.newSequence();
      const before = [...steps];
      const runsBefore = model.stats.runs;
      await newcomer.append(prompts(20, pack.vocabSize)[19]!.slice(0, 130)); // 130 tokens: 9 pieces of at most 16
      const during = steps.map((s, r) => s - before[r]!);
      stop = true;
      await Promise.all(decoding);
      // Each runner stepped between the pieces: at least once per piece after the first.
      for (const d of during) expect(d).toBeGreaterThanOrEqual(8);
      expect(model.stats.runs - runsBefore).toBeGreaterThanOrEqual(9 + 8);
      for (const s of [...runners, newcomer]) s.dispose();
    } finally {
      await model.release();
    }
  });

  test('with nobody decoding for quietMs, prompts go in pieces of quietPrefillChunk: a 130-token one in one pass, as alone', async () => {
    const pack = loadModelPack(demoCloud);
    let clock = 0;
    const model = await DecoderModel.load(pack, { threads: 1 });
    let scheduler = DecodeScheduler.over(model, { maxBatch: 4, prefillChunk: 16, quietMs: 500, now: () => clock })!;
    const alone = await DecoderModel.load(pack, { threads: 1 });
    const prompt = prompts(20, pack.vocabSize)[19]!.slice(0, 130);
    const prefill = async () => {
      const seq = scheduler.newSequence();
      const runsBefore = model.stats.runs;
      const { logits } = await seq.append(prompt);
      seq.dispose();
      return { runs: model.stats.runs - runsBefore, logits };
    };
    try {
      const expected = await alone.newSequence().append(prompt);
      // No decode pass yet: quiet. One pass (pieces of 512 by default), the computation of an append without a scheduler.
      const first = await prefill();
      expect(first.runs).toBe(1);
      expect(Array.from(first.logits)).toEqual(Array.from(expected.logits));
      // A decode step at 1,000 ms; 499 ms later the box is not quiet yet (9 pieces of at most 16), at 500 ms it is.
      clock = 1000;
      const stepping = scheduler.newSequence();
      await stepping.append([1]);
      clock = 1499;
      expect((await prefill()).runs).toBe(9);
      clock = 1500;
      expect((await prefill()).runs).toBe(1);
      // Quiet pieces of 100: two passes.
      scheduler = DecodeScheduler.over(model, { maxBatch: 4, prefillChunk: 16, quietPrefillChunk: 100 })!;
      expect((await prefill()).runs).toBe(2);
      stepping.dispose();
    } finally {
      await model.release();
      await alone.release();
    }
  });

  test('batching options: quietMs a whole number ≥ 0, quietPrefillChunk ≥ 1', async () => {
    const model = await DecoderModel.load(loadModelPack(demoCloud));
    expect(() => DecodeScheduler.over(model, { maxBatch: 4, quietMs: -1 })).toThrow('batching.quietMs must be a whole number ≥ 0, got -1');
    expect(() => DecodeScheduler.over(model, { maxBatch: 4, quietMs: 0.5 })).toThrow('batching.quietMs must be a whole number ≥ 0, got 0.5');
    expect(() => DecodeScheduler.over(model, { maxBatch: 4, quietPrefillChunk: 0 })).toThrow('batching.quietPrefillChunk must be a whole number ≥ 1, got 0');
    await model.release();
  });

  test('checkpoints and rollbacks inside batched steps restore each sequence alone', async () => {
    for (const dir of [demoEdge, QWEN.fused]) {
      const model = await DecoderModel.load(loadModelPack(dir), { threads: 1 });
      const scheduler = DecodeScheduler.over(model, { maxBatch: 4 })!;
      try {
        const [a, b] = [scheduler.newSequence(), scheduler.newSequence()];
        const [first, second] = await Promise.all([a.append([1, 7, 9]), b.append([1, 4])]);
        a.checkpoint();
        // Both step together twice; then `a` returns to its checkpoint and takes another token.
        await Promise.all([a.append([argmax(first.logits)]), b.append([argmax(second.logits)])]);
        await Promise.all([a.append([11]), b.append([12])]);
        a.rollback();
        expect(a.length).toBe(3);
        const [again] = await Promise.all([a.append([13]), b.append([14])]);
        const lone = model.newSequence();
        await lone.append([1, 7, 9]);
        const expected = await lone.append([13]);
        expect(maxAbsDiff(again.logits, expected.logits)).toBeLessThan(LOGIT_TOLERANCE);
        expect(again.batchSize).toBe(2);
        for (const s of [a, b, lone]) s.dispose();
      } finally {
        await model.release();
      }
    }
  });

  test("passes over the last pass's sequences feed its batch buffers again; what changed a row is copied again; the logits stay those of each sequence alone", async () => {
    for (const layout of ['fused', 'fused-matmul', 'plain'] as const) {
      const pack = loadModelPack(QWEN[layout]);
      const model = await DecoderModel.load(pack, { threads: 1 });
      const scheduler = DecodeScheduler.over(model, { maxBatch: 4 })!;
      const alone = await DecoderModel.load(pack, { threads: 1 });
      try {
        const seqs = [scheduler.newSequence(), scheduler.newSequence(), scheduler.newSequence()];
        // The same operations on a lone twin of each sequence: every logits row must match the twin's.
        const twins = seqs.map(() => alone.newSequence());
        let worst = 0;
        const next = seqs.map(() => 0);
        const compare = async (i: number, result: AppendResult, tokens: number[]) => {
          const expected = await twins[i]!.append(tokens);
          worst = Math.max(worst, maxAbsDiff(result.logits, expected.logits));
          next[i] = argmax(result.logits);
        };
        const stepAll = async (members = [0, 1, 2], token = (i: number) => next[i]!) => {
          const tokens = members.map(token);
          const results = await Promise.all(members.map((i, k) => seqs[i]!.append([tokens[k]!])));
          for (const [k, i] of members.entries()) await compare(i, results[k]!, [tokens[k]!]);
          return results;
        };
        const inputs = prompts(3, pack.vocabSize);
        const prefills = await Promise.all(seqs.map((s, i) => s.append(inputs[i]!)));
        for (const [i, r] of prefills.entries()) await compare(i, r, inputs[i]!);
        const reused = () => scheduler.stats.keptBuffersReused;
        const copied = () => scheduler.stats.keptRowsCopied;
        const fused = layout !== 'plain';

        // 40 steps together: the first gathers, and one more where the rows outgrow the first buffers' 32
        // positions; every other pass feeds the kept buffers and copies nothing.
        for (let step = 0; step < 40; step++) expect((await stepAll()).every((r) => r.batchSize === 3)).toBe(true);
        expect([reused(), copied()]).toEqual(fused ? [38, 0] : [0, 0]);

        // A rollback, then another token at that position: that row is copied again, not fed stale.
        for (const s of [seqs[0]!, twins[0]!]) s.checkpoint();
        await stepAll();
        for (const s of [seqs[0]!, twins[0]!]) s.rollback();
        await stepAll([0, 1, 2], (i) => (i === 0 ? (next[i]! + 1) % pack.vocabSize : next[i]!));
        // A multi-token append runs alone; the next pass copies that row again.
        await compare(1, await seqs[1]!.append([5, 6]), [5, 6]);
        await stepAll();
        expect([reused(), copied()]).toEqual(fused ? [41, 2] : [0, 0]);

        // A sequence sitting a pass out (its routed token on the network). The last row's: the others feed
        // the first two rows, and it finds its own unchanged on return.
        await stepAll([0, 1]);
        await stepAll();
        expect([reused(), copied()]).toEqual(fused ? [43, 2] : [0, 0]);
        // The first row's: the last row's sequence moves into it, and the one that sat out takes the last.
        await stepAll([1, 2]);
        await stepAll();
        expect([reused(), copied()]).toEqual(fused ? [45, 4] : [0, 0]);

        // A sequence leaving for good (the first row's): the last row's sequence moves into its row, and the
        // two left feed the first two rows of the kept buffers.
        seqs[2]!.dispose();
        for (let step = 0; step < 3; step++) await stepAll([0, 1]);
        expect(scheduler.stats.sizes[2]).toBe(5);
        expect([reused(), copied()]).toEqual(fused ? [48, 5] : [0, 0]);
        // Within the tolerance every CPU's kernels keep (a stale row is off by 0.2 and more); on this project's
        // x64 machines the fused layout's came out bit for bit, which the line below reports.
        console.log(`kept batch buffers, ${layout}: max |Δlogit| against each sequence alone ${worst.toExponential(2)}`);
        expect(worst).toBeLessThan(LOGIT_TOLERANCE);
        for (const s of [...seqs, ...twins]) s.dispose();
        expect(model.stats.liveSequences).toBe(0);
      } finally {
        await model.release();
        await alone.release();
      }
    }
  });

  test('a sequence disposed while its append waits: that append fails, the others run', async () => {
    const model = await DecoderModel.load(loadModelPack(demoEdge), { threads: 1 });
    const scheduler = DecodeScheduler.over(model, { maxBatch: 4 })!;
    try {
      const [a, b] = [scheduler.newSequence(), scheduler.newSequence()];
      await Promise.all([a.append([1]), b.append([1])]);
      const pendingA = a.append([5]);
      const pendingB = b.append([6]);
      a.dispose();
      await expect(pendingA).rejects.toThrow('sequence disposed while its append was queued');
      expect((await pendingB).batchSize).toBe(1);
      expect(b.length).toBe(2);
      b.dispose();
      expect(model.stats.liveSequences).toBe(0);
    } finally {
      await model.release();
    }
  });

  test('a sequence disposed after its pass was put together, before onnxruntime ran it: the other rows stand', async () => {
    for (const dir of [demoEdge, QWEN.fused]) {
      const model = await DecoderModel.load(loadModelPack(dir), { threads: 1 });
      const scheduler = DecodeScheduler.over(model, { maxBatch: 4 })!;
      try {
        // onnxruntime-node runs a session on a later turn of the event loop: a cancelled generation can dispose its sequence in between.
        const disposeBeforeNextRun = (victim: AppendableSequence) => {
          const forward = model.forward.bind(model);
          model.forward = async (...args) => {
            model.forward = forward;
            victim.dispose();
            return forward(...args);
          };
        };
        const logitsOf = (settled: PromiseSettledResult<AppendResult>) => {
          expect(settled.status).toBe('fulfilled');
          return (settled as PromiseFulfilledResult<AppendResult>).value.logits;
        };
        const lone = model.newSequence();
        const [a, b] = [scheduler.newSequence(), scheduler.newSequence()];
        disposeBeforeNextRun(a);
        const [, prompt] = await Promise.allSettled([a.append([1, 7, 9]), b.append([1, 4, 2])]);
        expect(scheduler.stats.promptsTogether).toBe(2);
        expect(maxAbsDiff(logitsOf(prompt!), (await lone.append([1, 4, 2])).logits)).toBeLessThan(LOGIT_TOLERANCE);

        const c = scheduler.newSequence();
        await c.append([1, 3]);
        disposeBeforeNextRun(c);
        const [, step] = await Promise.allSettled([c.append([8]), b.append([5])]);
        expect(scheduler.stats.sizes[2]).toBe(1);
        expect(maxAbsDiff(logitsOf(step!), (await lone.append([5])).logits)).toBeLessThan(LOGIT_TOLERANCE);
        expect(b.length).toBe(4);
        for (const s of [b, lone]) s.dispose();
        expect(model.stats.liveSequences).toBe(0);
      } finally {
        await model.release();
      }
    }
  });

  test('new prompts that share only their first ids with a cached one still share a pass; a longer shared head is restored', async () => {
    for (const dir of [demoEdge, QWEN.fused]) {
      const model = await DecoderModel.load(loadModelPack(dir), { threads: 1 });
      const scheduler = DecodeScheduler.over(model, { maxBatch: 4 })!;
      const cache = new PrefixCache(model, { maxBytes: 64 * 2 ** 20 });
      try {
        const head = prompts(3, model.pack.vocabSize)[2]!; // 17 ids
        const earlier = model.newSequence();
        await earlier.append(head);
        cache.keep(earlier);
        earlier.dispose();
        // Three prompts opening with the cached prompt's first four ids (a BOS and a few words): not worth restoring.
        const opening = head.slice(0, 4);
        expect(opening.length).toBeLessThan(MIN_RESTORED_TOKENS);
        const started = [3, 4, 5].map((t) => cache.newSequence([...opening, t, t + 1]));
        expect(started.map((s) => s.cachedTokens)).toEqual([0, 0, 0]);
        await Promise.all(started.map(({ sequence }, i) => scheduler.sequence(sequence).append([...opening, 3 + i, 4 + i])));
        expect(scheduler.stats.promptsTogether).toBe(3);
        // One opening with the cached prompt's first 12 ids restores them.
        const longer = cache.newSequence([...head.slice(0, 12), 7, 8]);
        expect(longer.cachedTokens).toBe(12);
        for (const s of [...started, longer]) s.sequence.dispose();
      } finally {
        await model.release();
      }
    }
  });

  test('an export that quantizes activations per tensor (int8 MatMulInteger) runs each step alone, and says why', async () => {
    const warnings: string[] = [];
    const log = { debug() {}, info() {}, error() {}, warn: (line: string) => warnings.push(line) };
    const model = await DecoderModel.load(loadModelPack(hub.edge, 'model_quantized.onnx'), { log });
    expect(DecodeScheduler.over(model, { maxBatch: 4 }, log)).toBeUndefined();
    expect(warnings).toEqual([
      `${hub.edge}: decode steps run one sequence at a time: the export quantizes activations with one scale per tensor (DynamicQuantizeLinear), which would mix the rows of a batch`,
    ]);
    await model.release();
  });

  test('bad settings are refused; maxBatch 1 turns batching off', async () => {
    const model = await DecoderModel.load(loadModelPack(demoEdge));
    expect(() => DecodeScheduler.over(model, { maxBatch: 0 })).toThrow('batching.maxBatch must be a whole number ≥ 1, got 0');
    expect(() => DecodeScheduler.over(model, { maxBatch: 4, prefillChunk: 2.5 })).toThrow('batching.prefillChunk must be a whole number ≥ 1, got 2.5');
    expect(() => DecodeScheduler.over(model, { maxBatch: 4, appendTokens: 0 })).toThrow('batching.appendTokens must be a whole number ≥ 1, got 0');
    expect(DecodeScheduler.over(model, { maxBatch: 1 })).toBeUndefined();
    await model.release();
  });
});
