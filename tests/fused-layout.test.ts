/**
 * The fused layout (GroupQueryAttention + SkipSimplifiedLayerNormalization over a preallocated KV buffer;
 * decode steps attending with standard ops on that buffer, or with GroupQueryAttention too) against the
 * plain one: the same weights built these ways give the same greedy ids and logits within LOGIT_TOLERANCE;
 * the buffer is written in place; checkpoints and rollbacks copy nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { readDecoderIo } from '../src/shared/model/decoder-io.ts';
import { KV_CAPACITY_STEP, kvCapacity } from '../src/shared/model/kv-buffer.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { ort } from '../src/shared/model/ort.ts';
import { DEMO } from '../src/shared/paths.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { profileDecode } from '../src/tools/bench/decode-profile.ts';
import { weightTraffic } from '../src/tools/bench/decode-weights.ts';
import { convertLlama2c } from '../src/tools/models/convert-llama2c.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { inspectPath } from '../src/tools/models/inspect-model.ts';
import { quantizePack } from '../src/tools/models/quantize.ts';
import { readModel } from '../src/tools/models/onnx-file.ts';
import { allNodes } from '../src/shared/model/onnx-graph.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { maxAbsDiff } from './helpers/max-abs-diff.ts';
import { argmax } from '../src/shared/model/logits.ts';

/**
 * fp32 fused vs plain, largest absolute logit difference allowed: both run the same float32 arithmetic
 * in a different order (fused kernels, rotary tables computed in JS instead of by Cos/Sin nodes); the
 * measured differences are below 1e-6.
 */
const LOGIT_TOLERANCE = 1e-4;
const PROMPTS = ['Once upon a time', 'Tom and his dog went to the park. They', 'The little bird was sad because'];
const STEPS = 40;

const work = mkdtempSync(join(tmpdir(), 'fused-layout-'));
/**
 * tiny-qwen2 (random weights, the real Qwen tokenizer, head_dim 16) in both layouts; `fused` as built by
 * default (GroupQueryAttention for every run), `matmul` with decode steps through standard ops.
 */
const PACKS = { plain: join(work, 'plain'), fused: join(work, 'fused'), matmul: join(work, 'fused-matmul') };
let tokenizer: TextTokenizer;

beforeAll(async () => {
  for (const layout of ['plain', 'fused'] as const)
    await writeRandomPack({ preset: 'tiny-qwen2', out: PACKS[layout], seed: 7, hiddenStatesOutput: true, layout });
  await writeRandomPack({ preset: 'tiny-qwen2', out: PACKS.matmul, seed: 7, hiddenStatesOutput: true, layout: 'fused', decodeAttention: 'matmul' });
  tokenizer = await TextTokenizer.fromPack(PACKS.plain);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function withModels<T>(body: (plain: DecoderModel, fused: DecoderModel) => Promise<T>, fusedPack = PACKS.fused): Promise<T> {
  const plain = await DecoderModel.load(loadModelPack(PACKS.plain), { threads: 1 });
  const fused = await DecoderModel.load(loadModelPack(fusedPack), { threads: 1 });
  try {
    return await body(plain, fused);
  } finally {
    await plain.release();
    await fused.release();
  }
}

describe('fp32 fused vs plain', () => {
  test.each([
    ['GroupQueryAttention throughout', 'fused'],
    ['decode steps through standard ops', 'matmul'],
  ] as const)(`%s: the same greedy ids on the test prompts, logits and hidden states within ${LOGIT_TOLERANCE}`, async (_, pack) => {
    await withModels(async (plain, fused) => {
      expect(plain.io.layout).toBe('plain');
      expect(fused.io.layout).toBe('fused');
      let worst = 0;
      for (const prompt of PROMPTS) {
        const seqs = [plain.newSequence(), fused.newSequence()] as const;
        const ids: number[][] = [[], []];
        let results = await Promise.all(seqs.map((s) => s.append(tokenizer.encode(prompt, { addBos: false }))));
        for (let step = 0; step < STEPS; step++) {
          worst = Math.max(worst, maxAbsDiff(results[0].logits, results[1].logits), maxAbsDiff(results[0].hidden, results[1].hidden));
          const next = results.map((r) => argmax(r.logits));
          ids[0]!.push(next[0]!);
          ids[1]!.push(next[1]!);
          results = await Promise.all(seqs.map((s, i) => s.append([next[i]!])));
        }
        expect(ids[1]).toEqual(ids[0]!);
        for (const s of seqs) s.dispose();
      }
      expect(worst).toBeLessThan(LOGIT_TOLERANCE);
      expect(fused.stats.liveSequences).toBe(0);
    }, PACKS[pack]);
  });

  test('stories260K (head_dim 8, padded to 16 in the fused graph): the same greedy ids and logits as the demo cloud pack', async () => {
    await ensureDemoPacks();
    const out = join(work, 'stories-fused');
    await convertLlama2c({ checkpoint: DEMO.checkpoint, tokenizer: DEMO.tokenizer, out, layout: 'fused' });
    const models = [
      await DecoderModel.load(loadModelPack(DEMO.cloudPack), { threads: 1 }),
      await DecoderModel.load(loadModelPack(out), { threads: 1 }),
    ] as const;
    try {
      expect(models[1].io.layout).toBe('fused');
      expect(models[1].cacheHeadDim).toBe(16);
      expect(models[0].cacheHeadDim).toBe(8);
      const storiesTokenizer = await TextTokenizer.fromPack(DEMO.cloudPack);
      let worst = 0;
      for (const prompt of PROMPTS) {
        const seqs = models.map((m) => m.newSequence());
        let results = await Promise.all(seqs.map((s) => s.append(storiesTokenizer.encode(prompt))));
        for (let step = 0; step < STEPS; step++) {
          worst = Math.max(worst, maxAbsDiff(results[0]!.logits, results[1]!.logits), maxAbsDiff(results[0]!.hidden, results[1]!.hidden));
          const next = argmax(results[0]!.logits);
          expect(argmax(results[1]!.logits)).toBe(next);
          results = await Promise.all(seqs.map((s) => s.append([next])));
        }
        for (const s of seqs) s.dispose();
      }
      expect(worst).toBeLessThan(LOGIT_TOLERANCE);
    } finally {
      for (const m of models) await m.release();
    }
  });
});

describe('models quantize on a fused pack', () => {
  test.each(['fused', 'matmul'] as const)(
    '%s: q4 keeps the attention, quantizes every weight and no attention constant; the same greedy ids as the plain pack quantized alike',
    async (pack) => {
      if (!existsSync(`${PACKS.plain}-q4`)) await quantizePack({ input: PACKS.plain, output: `${PACKS.plain}-q4`, dtype: 'q4' });
      await quantizePack({ input: PACKS[pack], output: `${PACKS[pack]}-q4`, dtype: 'q4' });
      const ops = Object.fromEntries(inspectPath(`${PACKS[pack]}-q4`)[0]!.opCounts.map((o) => [o.opType, o.count]));
      // Counted in If branches too: with matmul decode steps, per layer one GroupQueryAttention (prefills) beside the steps' ops.
      expect(ops['com.microsoft.GroupQueryAttention']).toBe(2);
      expect(ops.If ?? 0).toBe(pack === 'matmul' ? 2 + 1 : 0);
      expect(ops['com.microsoft.SkipSimplifiedLayerNormalization']).toBe(4);
      // Per layer q/k/v packed, o, gate/up packed and down; plus the LM head.
      expect(ops['com.microsoft.MatMulNBits']).toBe(2 * 4 + 1);
      // What MatMul is left multiplies activations, or by the exact ±1 rotation matrix, which stays float32.
      const graph = readModel(join(`${PACKS[pack]}-q4`, 'model.onnx')).graph!;
      const initializers = new Set(graph.initializer.map((t) => t.name));
      const constantOperands = [...allNodes(graph)].filter((n) => n.opType === 'MatMul').flatMap((n) => n.input.filter((i) => initializers.has(i)));
      expect(constantOperands).toEqual(pack === 'matmul' ? ['const.attn.rotate_half', 'const.attn.rotate_half'] : []);
      const models = await Promise.all([PACKS.plain, PACKS[pack]].map((dir) => DecoderModel.load(loadModelPack(`${dir}-q4`), { threads: 1 })));
      try {
        expect(models[1]!.io.layout).toBe('fused');
        const seqs = models.map((m) => m.newSequence());
        let results = await Promise.all(seqs.map((s) => s.append(tokenizer.encode(PROMPTS[1]!))));
        for (let step = 0; step < 16; step++) {
          expect(maxAbsDiff(results[0]!.logits, results[1]!.logits)).toBeLessThan(LOGIT_TOLERANCE);
          const next = argmax(results[0]!.logits);
          expect(argmax(results[1]!.logits)).toBe(next);
          results = await Promise.all(seqs.map((s) => s.append([next])));
        }
        for (const s of seqs) s.dispose();
      } finally {
        for (const m of models) await m.release();
      }
    },
  );
});

describe('num_logits_to_keep', () => {
  test("a prefill returns the last two positions' logits, the last equal to the last row of every position's", async () => {
    await withModels(async (plain, fused) => {
      for (const model of [plain, fused]) {
        expect(model.io.logitsToKeep).toBe(true);
        const prompt = tokenizer.encode(PROMPTS[1]!, { addBos: false });
        const [last, all] = [model.newSequence(), model.newSequence()];
        const bytesBefore = model.stats.outputBytes;
        const lastOnly = await last.append(prompt);
        const lastOnlyBytes = model.stats.outputBytes - bytesBefore;
        const every = await all.append(prompt, { allPositions: true });
        const everyBytes = model.stats.outputBytes - bytesBefore - lastOnlyBytes;
        expect(every.allLogits!.length).toBe(prompt.length * model.pack.vocabSize);
        // The logits output shrinks from one row per fed position to two (the last two: see decoder-model.ts).
        expect(everyBytes - lastOnlyBytes).toBe((prompt.length - 2) * model.pack.vocabSize * 4);
        expect(maxAbsDiff(lastOnly.logits, every.logits)).toBeLessThan(1e-5);
        expect(argmax(lastOnly.logits)).toBe(argmax(every.logits));
        last.dispose();
        all.dispose();
      }
    });
  });
});

describe('the shared KV buffer', () => {
  test('checkpoint, append, rollback: nothing copied, and the next append matches the plain layout', async () => {
    await withModels(async (plain, fused) => {
      const prompt = tokenizer.encode(PROMPTS[0]!, { addBos: false });
      const seqs = [plain.newSequence(), fused.newSequence()] as const;
      await Promise.all(seqs.map((s) => s.append(prompt)));
      for (const s of seqs) s.checkpoint();
      await Promise.all(seqs.map((s) => s.append([100, 200, 300])));
      for (const s of seqs) s.checkpoint();
      await Promise.all(seqs.map((s) => s.append([7])));
      for (const s of seqs) s.rollback();
      expect(seqs[1].length).toBe(prompt.length);
      const after = await Promise.all(seqs.map((s) => s.append([42])));
      expect(maxAbsDiff(after[0].logits, after[1].logits)).toBeLessThan(LOGIT_TOLERANCE);
      expect(fused.stats.kvBytesCopied).toBe(0);
      for (const s of seqs) s.dispose();
    });
  });

  test('outgrowing the capacity copies the cache once, into a buffer one step longer; a rollback across it stays exact', async () => {
    await withModels(async (plain, fused) => {
      const pack = fused.pack;
      const seqs = [plain.newSequence(), fused.newSequence()] as const;
      const prompt = Array.from({ length: KV_CAPACITY_STEP - 2 }, (_, i) => 3 + ((i * 97) % 5000));
      await Promise.all(seqs.map((s) => s.append(prompt)));
      expect(fused.stats.kvBytesCopied).toBe(0);
      for (const s of seqs) s.checkpoint();
      await Promise.all(seqs.map((s) => s.append([5, 6, 7, 8])));
      const copied = 2 * pack.numLayers * pack.numKvHeads * (KV_CAPACITY_STEP - 2) * pack.headDim * 4;
      expect(fused.stats.kvBytesCopied).toBe(copied);
      for (const s of seqs) s.rollback();
      const after = await Promise.all(seqs.map((s) => s.append([9, 10, 11])));
      expect(maxAbsDiff(after[0].logits, after[1].logits)).toBeLessThan(LOGIT_TOLERANCE);
      expect(fused.stats.kvBytesCopied).toBe(2 * copied);
      for (const s of seqs) s.dispose();
    });
  });

  test('onnxruntime writes the new positions into the tensor fed as both past and present', async () => {
    const pack = loadModelPack(PACKS.fused);
    const session = await ort.InferenceSession.create(pack.modelPath, { intraOpNumThreads: 1 });
    try {
      const capacity = 8;
      const buffer = (): InstanceType<typeof ort.Tensor> =>
        new ort.Tensor('float32', new Float32Array(pack.numKvHeads * capacity * pack.headDim), [1, pack.numKvHeads, capacity, pack.headDim]);
      const key = buffer();
      const value = buffer();
      // Layer 1's buffers are fed and fetched too; only layer 0's are inspected.
      const layer1 = { key: buffer(), value: buffer() };
      const otherLayers = { 'present.1.key': layer1.key, 'present.1.value': layer1.value };
      const tokens = [785, 2632, 11];
      const out = await session.run(
        {
          input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [1, 3]),
          seqlens_k: new ort.Tensor('int32', Int32Array.of(tokens.length - 1), [1]),
          total_sequence_length: new ort.Tensor('int32', Int32Array.of(tokens.length), []),
          num_logits_to_keep: new ort.Tensor('int64', BigInt64Array.of(1n), []),
          'past_key_values.0.key': key,
          'past_key_values.0.value': value,
          'past_key_values.1.key': layer1.key,
          'past_key_values.1.value': layer1.value,
        },
        { logits: null, hidden_states: null, 'present.0.key': key, 'present.0.value': value, ...otherLayers },
      );
      const data = key.data as Float32Array;
      const written = (position: number) => data.subarray(position * pack.headDim, (position + 1) * pack.headDim).some((x) => x !== 0);
      expect([0, 1, 2, 3].map(written)).toEqual([true, true, true, false]);
      expect((value.data as Float32Array).some((x) => x !== 0)).toBe(true);
      expect(out['present.0.key']!.dims).toEqual([1, pack.numKvHeads, capacity, pack.headDim]);
    } finally {
      await session.release();
    }
  });

  test('new_key_values.* are exactly the positions the run wrote into present.*, per row of a batch', async () => {
    const pack = loadModelPack(PACKS.fused);
    const session = await ort.InferenceSession.create(pack.modelPath, { intraOpNumThreads: 1 });
    try {
      const capacity = 8;
      const zeros = (batch: number) =>
        new ort.Tensor('float32', new Float32Array(batch * pack.numKvHeads * capacity * pack.headDim), [batch, pack.numKvHeads, capacity, pack.headDim]);
      const buffers = (batch: number) => Object.fromEntries(['0.key', '0.value', '1.key', '1.value'].map((n) => [n, zeros(batch)]));
      const run = async (ids: number[], batch: number, seqlens: number[], kv: Record<string, InstanceType<typeof ort.Tensor>>) => {
        const feeds: Record<string, InstanceType<typeof ort.Tensor>> = {
          input_ids: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [batch, ids.length / batch]),
          seqlens_k: new ort.Tensor('int32', Int32Array.from(seqlens), [batch]),
          total_sequence_length: new ort.Tensor('int32', Int32Array.of(Math.max(...seqlens) + 1), []),
          num_logits_to_keep: new ort.Tensor('int64', BigInt64Array.of(1n), []),
        };
        const fetches: Record<string, InstanceType<typeof ort.Tensor> | null> = { logits: null, hidden_states: null };
        for (const [n, t] of Object.entries(kv)) {
          feeds[`past_key_values.${n}`] = t;
          fetches[`present.${n}`] = t;
          fetches[`new_key_values.${n}`] = null;
        }
        return session.run(feeds, fetches);
      };
      const positions = (t: InstanceType<typeof ort.Tensor>, row: number, from: number, count: number) => {
        const [, heads, cap, hd] = t.dims as number[];
        const data = t.data as Float32Array;
        return Array.from({ length: heads! }, (_, h) =>
          Array.from(data.subarray(((row * heads! + h) * cap! + from) * hd!, ((row * heads! + h) * cap! + from + count) * hd!)),
        );
      };
      const rows = (t: InstanceType<typeof ort.Tensor>, row: number) => positions(t, row, 0, t.dims[2]!);
      // A prompt of three: new_key_values holds positions 0 to 2 of present.
      const prompt = buffers(1);
      const first = await run([785, 2632, 11], 1, [2], prompt);
      for (const n of Object.keys(prompt)) {
        expect(first[`new_key_values.${n}`]!.dims).toEqual([1, pack.numKvHeads, 3, pack.headDim]);
        expect(rows(first[`new_key_values.${n}`]!, 0)).toEqual(positions(prompt[n]!, 0, 0, 3));
      }
      // A batched decode step, rows of different lengths: each row's one new position, where it was written.
      const pair = buffers(2);
      const lengths = [5, 2];
      const step = await run([7, 9], 2, lengths, pair);
      for (const n of Object.keys(pair)) {
        lengths.forEach((length, row) => expect(rows(step[`new_key_values.${n}`]!, row)).toEqual(positions(pair[n]!, row, length, 1)));
        expect(
          positions(pair[n]!, 1, 2, 1)
            .flat()
            .some((x) => x !== 0),
        ).toBe(true);
      }
    } finally {
      await session.release();
    }
  });

  test('a graph without new_key_values.* (built before them) still runs, fetching the buffers: the same logits, batched too (prompts and steps)', async () => {
    const older = join(work, 'fused-older');
    await writeRandomPack({ preset: 'tiny-qwen2', out: older, seed: 7, hiddenStatesOutput: true, layout: 'fused', newKeyValuesOutputs: false });
    const models = [
      await DecoderModel.load(loadModelPack(PACKS.fused), { threads: 1 }),
      await DecoderModel.load(loadModelPack(older), { threads: 1 }),
    ] as const;
    const schedulers = models.map((model) => DecodeScheduler.over(model, { maxBatch: 4 })!);
    try {
      expect([models[0].io.newKeyValues, models[1].io.newKeyValues]).toEqual([true, false]);
      const traces = await Promise.all(
        schedulers.map(async (scheduler) => {
          const seqs = PROMPTS.map(() => scheduler.newSequence());
          const logits: Float32Array[][] = [];
          let results = await Promise.all(seqs.map((s, p) => s.append(tokenizer.encode(PROMPTS[p]!, { addBos: false }))));
          for (let step = 0; step < 12; step++) {
            logits.push(results.map((r) => r.logits));
            results = await Promise.all(seqs.map((s, p) => s.append([argmax(results[p]!.logits)])));
          }
          for (const s of seqs) s.dispose();
          return logits;
        }),
      );
      // The same kernels on the same inputs: only how the new positions reach the buffer differs.
      expect(traces[1]).toEqual(traces[0]);
      expect(schedulers[0]!.stats.rows).toBeGreaterThan(schedulers[0]!.stats.passes);
      // The prompts arrived together: their first pieces shared a pass, in both graphs.
      for (const s of schedulers) expect(s.stats.promptsTogether).toBeGreaterThan(1);
    } finally {
      for (const m of models) await m.release();
    }
  });

  test('capacity: the current one while it fits, else whole steps of KV_CAPACITY_STEP, never above the model limit', () => {
    expect(KV_CAPACITY_STEP).toBe(32);
    expect(kvCapacity(10, 0, 512)).toBe(32);
    expect(kvCapacity(200, 256, 512)).toBe(256);
    expect(kvCapacity(257, 256, 4096)).toBe(288);
    expect(kvCapacity(600, 256, 4096)).toBe(608);
    expect(kvCapacity(690, 256, 700)).toBe(700);
    expect(kvCapacity(5, 0, 16)).toBe(16);
  });
});

describe('reading the layout from the inputs', () => {
  const cache = ['past_key_values.0.key', 'past_key_values.0.value'];
  const outputs = [{ name: 'logits', type: 'float32' }, ...cache.map((n) => ({ name: n.replace('past_key_values', 'present'), type: 'float32' }))];
  const inputs = (seqlens: string) => [
    { name: 'input_ids', type: 'int64' },
    { name: 'seqlens_k', type: seqlens },
    { name: 'total_sequence_length', type: 'int32' },
    ...cache.map((name) => ({ name, type: 'float32' })),
  ];

  test('seqlens_k and total_sequence_length (int32) make it fused', () => {
    expect(readDecoderIo({ where: 'm.onnx', numLayers: 1, inputs: inputs('int32'), outputs }).layout).toBe('fused');
  });

  test('an int64 seqlens_k is refused, naming it', () => {
    expect(() => readDecoderIo({ where: 'm.onnx', numLayers: 1, inputs: inputs('int64'), outputs })).toThrow('m.onnx: input seqlens_k is int64');
  });

  test('a fused graph may return its cache as the new positions alone (new_key_values.*); a plain one may not', () => {
    const newPositions = [
      { name: 'logits', type: 'float32' },
      ...cache.map((n) => ({ name: n.replace('past_key_values', 'new_key_values'), type: 'float32' })),
    ];
    const io = readDecoderIo({ where: 'm.onnx', numLayers: 1, inputs: inputs('int32'), outputs: newPositions });
    expect([io.layout, io.newKeyValues, io.cache]).toEqual(['fused', true, 'float32']);
    const plainInputs = [{ name: 'input_ids', type: 'int64' }, { name: 'attention_mask', type: 'int64' }, ...cache.map((name) => ({ name, type: 'float32' }))];
    expect(() => readDecoderIo({ where: 'm.onnx', numLayers: 1, inputs: plainInputs, outputs: newPositions })).toThrow('or their present.* outputs');
  });
});

describe('bench decode --profile on the fused layout', () => {
  test('no KV bytes copied per step, only the new positions fetched; decode steps run no GroupQueryAttention unless built to', async () => {
    const common = { promptTokens: 20, steps: 3, threads: 1, log: () => {} };
    const plain = await profileDecode({ ...common, dir: PACKS.plain });
    const fused = await profileDecode({ ...common, dir: PACKS.fused });
    const matmul = await profileDecode({ ...common, dir: PACKS.matmul });
    expect(plain.perStep.kvCopyBytes).toBeGreaterThan(0);
    // Out come the logits, the hidden state and the one new position of each cache tensor (new_key_values.*),
    // not the whole KV buffer (KV_CAPACITY_STEP positions here) that fetching present.* copies out.
    const { numLayers, numKvHeads, headDim, vocabSize, hiddenSize } = loadModelPack(PACKS.fused);
    for (const profile of [fused, matmul]) {
      expect(profile.perStep.kvCopyBytes).toBe(0);
      expect(profile.perStep.outputBytes).toBe(2 * numLayers * numKvHeads * 1 * headDim * 4 + (vocabSize + hiddenSize) * 4);
      expect(profile.perStep.nodes).toBeLessThan(plain.perStep.nodes);
    }
    const attentionNodes = (p: typeof fused) => p.byOpType.find((o) => o.op === 'GroupQueryAttention')?.nodes ?? 0;
    expect([attentionNodes(fused), attentionNodes(matmul)]).toEqual([numLayers, 0]);
    // The If nodes are not counted: their time is their branch's nodes'.
    expect(matmul.byOpType.find((o) => o.op === 'If')).toBeUndefined();
    expect(fused.perStep.nodes).toBeLessThan(plain.perStep.nodes / 2);
  });
});

describe('bytes read per token on the fused layout', () => {
  test.each(['fused', 'matmul'] as const)(
    '%s: the rotary cos/sin tables count as lookups (one row per step), so fused and plain read the same weights',
    (pack) => {
      const plain = weightTraffic(join(PACKS.plain, 'model.onnx'));
      const fused = weightTraffic(join(PACKS[pack], 'model.onnx'));
      expect(fused.lookups).toEqual(['const.cos_cache', 'const.sin_cache']);
      const { maxPositions, headDim, hiddenSize, numKvHeads } = loadModelPack(PACKS[pack]);
      const tables = 2 * maxPositions * (headDim / 2) * 4;
      // The decode steps' standard-op attention adds its rotation matrix and per-head factors, [head_dim, head_dim] and 3 × [heads, head_dim].
      const heads = hiddenSize / headDim + 2 * numKvHeads;
      const attentionConstants = pack === 'matmul' ? 4 * (headDim * headDim + 3 * heads * headDim) : 0;
      // Besides those, each graph holds only shape constants (the plain one its mask and inverse frequencies too): a few hundred bytes.
      expect(Math.abs(fused.perToken - 2 * (headDim / 2) * 4 - attentionConstants - plain.perToken)).toBeLessThan(1024);
      expect(Math.abs(fused.total - tables - attentionConstants - plain.total)).toBeLessThan(1024);
    },
  );
});
