/**
 * `models optimize` on the real Hugging Face exports (../shared/assets/models/hf-exports: transformers'
 * LlamaForCausalLM of stories260K, exported by torch): the weights read back from the plain graph and
 * rebuilt by the project's builder give the export's greedy ids (and transformers' for the 5-layer model)
 * with logits within LOGIT_TOLERANCE of the export's; quantized, foreign and inconsistent exports are
 * refused with what was expected and found, and leave no output behind.
 * The exports' head_dim of 8 runs fused because the builder zero-pads heads to 16 (onnxruntime's CPU
 * GroupQueryAttention takes multiples of 16 only).
 */
import { greedyRunOfPack, type GreedyRun } from './helpers/greedy-run.ts';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import type { GenerationEvent, TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { DEFAULT_LIMITS } from '../src/edge/request/generation-request.ts';
import { loadRouter } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { DataType, GraphBuilder } from '../src/shared/model/onnx-graph.ts';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { readHubExport } from '../src/tools/models/hub-export-reader.ts';
import { inspectPath } from '../src/tools/models/inspect-model.ts';
import { readModel, writeModel } from '../src/tools/models/onnx-file.ts';
import { optimizeHubExport, type OptimizeOptions } from '../src/tools/models/optimize.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { addProjectionBiases, editedHub, untieLmHead } from './helpers/edited-hub-exports.ts';
import { HF_EXPORTS } from './helpers/hub-export-packs.ts';

/** [BOS] "Once upon a time" in the stories260K tokenizer, the MANIFEST's prompt. */
const PROMPT_IDS = [1, 403, 407, 261, 378];
/** transformers' greedy continuation of PROMPT_IDS with the 5-layer model (MANIFEST.md). */
const TRANSFORMERS_5L = [432, 383, 286, 261, 376, 298, 315, 421, 395, 317];
/**
 * Rebuilt vs export, largest absolute logit difference allowed: the same float32 weights in a graph
 * that orders the arithmetic differently (the rotary tables, the RMSNorm's divide); measured 1.4e-5
 * (5 layers) and 7.6e-6 (3 layers) over 40 greedy steps.
 */
const LOGIT_TOLERANCE = 1e-4;
/**
 * The fp16 export's weights widened to float32 vs the fp32 export: the weights' rounding to 11 bits is
 * the whole difference, measured 1.3e-2 (5 layers) and 7.2e-3 (3 layers) on these 10 steps, about what
 * the fp16 export run in float16 is off by (1.4e-2, hub-exports.test.ts).
 */
const FP16_LOGIT_TOLERANCE = 3e-2;
const FOLDERS = [
  ['stories260k-hf', 5],
  ['stories260k-3l-hf', 3],
] as const;

const work = mkdtempSync(join(tmpdir(), 'models-optimize-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

type Greedy = GreedyRun;

/** TOKENS greedy ids after PROMPT_IDS, with the logits and hidden state of every step. */
function greedy(packDir: string, file = 'model.onnx', tokens = TRANSFORMERS_5L.length): Promise<Greedy> {
  return greedyRunOfPack(packDir, file, PROMPT_IDS, tokens);
}

function maxAbsDiff(a: Float32Array[], b: Float32Array[]): number {
  expect(a.map((x) => x.length)).toEqual(b.map((x) => x.length));
  let max = 0;
  a.forEach((row, i) => row.forEach((v, j) => (max = Math.max(max, Math.abs(v - b[i]![j]!)))));
  return max;
}

/** The export's own greedy run (loaded from the read-only hub folder as it is), once per folder. */
const exportRuns = new Map<string, Promise<Greedy>>();
function exportRun(folder: string): Promise<Greedy> {
  if (!exportRuns.has(folder)) exportRuns.set(folder, greedy(join(HF_EXPORTS, folder)));
  return exportRuns.get(folder)!;
}

describe.each(FOLDERS)('%s rebuilt by the plain builder', (folder, layers) => {
  const out = join(work, `${folder}-plain`);

  test('the spec comes from config.json and the graph: tied embedding, no biases, half-split rotary', () => {
    const { spec, weightType, weights } = readHubExport(join(HF_EXPORTS, folder, 'model.onnx'));
    expect(spec).toEqual({
      modelType: 'llama',
      vocabSize: 512,
      hiddenSize: 64,
      intermediateSize: 172,
      numLayers: layers,
      numHeads: 8,
      numKvHeads: 4,
      headDim: 8,
      ropeTheta: 10000,
      rmsNormEps: 1e-5,
      maxPositions: 512,
      qkvBias: false,
      tieEmbeddings: true,
      bosTokenId: 1,
      eosTokenIds: [2],
    });
    expect(weightType).toBe('float32');
    expect(weights.lmHead).toBeUndefined();
    expect(weights.layers).toHaveLength(layers);
  });

  test(`the same greedy ids as the export${layers === 5 ? ' and transformers' : ''}, logits within ${LOGIT_TOLERANCE}`, async () => {
    const result = await optimizeHubExport({ input: join(HF_EXPORTS, folder), output: out, layout: 'plain' });
    expect(result.layout).toBe('plain');
    const [exported, rebuilt] = [await exportRun(folder), await greedy(out)];
    expect(rebuilt.ids).toEqual(exported.ids);
    if (layers === 5) expect(rebuilt.ids).toEqual(TRANSFORMERS_5L);
    expect(maxAbsDiff(rebuilt.logits, exported.logits)).toBeLessThan(LOGIT_TOLERANCE);
  });
});

describe.each(FOLDERS)('%s rebuilt in the fused layout', (folder, layers) => {
  test(`GroupQueryAttention per layer; the export's greedy ids, logits within ${LOGIT_TOLERANCE}`, async () => {
    const out = join(work, `${folder}-fused`);
    expect((await optimizeHubExport({ input: join(HF_EXPORTS, folder), output: out })).layout).toBe('fused');
    const ops = Object.fromEntries(inspectPath(out)[0]!.opCounts.map((o) => [o.opType, o.count]));
    expect(ops['com.microsoft.GroupQueryAttention']).toBe(layers);
    const [exported, rebuilt] = [await exportRun(folder), await greedy(out)];
    expect(rebuilt.ids).toEqual(exported.ids);
    if (layers === 5) expect(rebuilt.ids).toEqual(TRANSFORMERS_5L);
    expect(maxAbsDiff(rebuilt.logits, exported.logits)).toBeLessThan(LOGIT_TOLERANCE);
    const plain = await greedy(join(work, `${folder}-plain`));
    expect(maxAbsDiff(rebuilt.hidden, plain.hidden)).toBeLessThan(LOGIT_TOLERANCE);
  });
});

test(`model_fp16.onnx (one file of the folder): weights widened to float32, transformers' ids, logits within ${FP16_LOGIT_TOLERANCE} of fp32`, async () => {
  const out = join(work, 'fp16-plain');
  const result = await optimizeHubExport({ input: join(HF_EXPORTS, 'stories260k-hf', 'model_fp16.onnx'), output: out, layout: 'plain' });
  expect(result.weightType).toBe('float16');
  const model = await DecoderModel.load(loadModelPack(out), { threads: 1 });
  expect([model.io.cache, model.io.logits, model.io.hidden]).toEqual(['float32', 'float32', 'float32']);
  await model.release();
  const rebuilt = await greedy(out);
  expect(rebuilt.ids).toEqual(TRANSFORMERS_5L);
  const diff = maxAbsDiff(rebuilt.logits, (await exportRun('stories260k-hf')).logits);
  expect(diff).toBeGreaterThan(0);
  expect(diff).toBeLessThan(FP16_LOGIT_TOLERANCE);
});

describe('the output pack on the edge', () => {
  const hub = join(work, 'hub-with-tokenizer');
  const out = join(work, 'edge-pack');

  beforeAll(async () => {
    await ensureDemoPacks();
    mkdirSync(hub);
    for (const f of ['model.onnx', 'config.json', 'generation_config.json']) copyFileSync(join(HF_EXPORTS, 'stories260k-hf', f), join(hub, f));
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(DEMO.cloudPack, f), join(hub, f));
    await optimizeHubExport({ input: hub, output: out, layout: 'plain' });
  });

  test('a full pack: config, generation config and tokenizer files copied, hidden_states, pack-source.json', async () => {
    expect(readdirSync(out).sort()).toEqual([
      'config.json',
      'generation_config.json',
      'model.onnx',
      'pack-source.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'written-by.json',
    ]);
    for (const f of ['generation_config.json', 'tokenizer.json', 'tokenizer_config.json'])
      expect(readFileSync(join(out, f))).toEqual(readFileSync(join(hub, f)));
    const pack = loadModelPack(out);
    expect([pack.modelType, pack.numLayers, pack.numKvHeads, pack.headDim, pack.hiddenSize, pack.vocabSize, pack.bosTokenId, pack.eosTokenIds]).toEqual([
      'llama',
      5,
      4,
      8,
      64,
      512,
      1,
      [2],
    ]);
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect([config.torch_dtype, config.tie_word_embeddings, config.transformers_version]).toEqual(['float32', true, '5.17.0']);
    expect(JSON.parse(readFileSync(join(out, 'pack-source.json'), 'utf8'))).toMatchObject({ tool: 'optimize', layout: 'plain' });
    const model = await DecoderModel.load(pack, { threads: 1 });
    expect(model.io.hidden).toBe('float32');
    await model.release();
  });

  test("the EdgeRuntime generates transformers' greedy text from it (small_only, the tokenizer it carries)", async () => {
    const edgeModel = await DecoderModel.load(loadModelPack(out));
    const router = await loadRouter(undefined);
    const tokenizer = await TextTokenizer.fromPack(out);
    const runtime = new EdgeRuntime({ edgeModel, router, tokenizer }, { ...DEFAULT_LIMITS, maxConcurrent: 1 });
    try {
      const events: GenerationEvent[] = [];
      const request = { prompt: 'Once upon a time', mode: 'small_only' as const, temperature: 0, maxNewTokens: TRANSFORMERS_5L.length };
      for await (const e of runtime.start(request).events()) events.push(e);
      const tokens = events.filter((e): e is TokenEvent => e.type === 'token');
      expect(tokens.map((t) => t.id)).toEqual(TRANSFORMERS_5L);
      const done = events.at(-1)!;
      expect(done.type === 'done' && done.text).toBe(tokenizer.decode(TRANSFORMERS_5L));
    } finally {
      await runtime.shutdown();
      await router.release();
      await edgeModel.release();
    }
  });
});

test(`a Qwen2 export (q/k/v biases) with an untied LM head: read as such, the export's greedy ids, logits within ${LOGIT_TOLERANCE}`, async () => {
  const hub = editedHub(work, 'qwen2-biases-untied', {
    modelFrom: 'stories260k-3l-hf',
    config: (c) => Object.assign(c, { model_type: 'qwen2', architectures: ['Qwen2ForCausalLM'], tie_word_embeddings: false }),
    graph: (m) => {
      addProjectionBiases(m, ['q', 'k', 'v']);
      untieLmHead(m);
    },
  });
  const { spec, weights } = readHubExport(join(hub, 'model.onnx'));
  expect([spec.modelType, spec.qkvBias, spec.tieEmbeddings]).toEqual(['qwen2', true, false]);
  expect([weights.layers[2]!.bq?.length, weights.layers[2]!.bk?.length, weights.layers[2]!.bv?.length, weights.lmHead?.length]).toEqual([64, 32, 32, 64 * 512]);
  const out = join(work, 'qwen2-biases-untied-pack');
  await optimizeHubExport({ input: hub, output: out, layout: 'plain' });
  const [edited, original, rebuilt] = [await greedy(hub), await exportRun('stories260k-3l-hf'), await greedy(out)];
  // The edits change the model, so a rebuild that dropped them could not pass.
  expect(maxAbsDiff(edited.logits.slice(0, 1), original.logits.slice(0, 1))).toBeGreaterThan(0.1);
  expect(rebuilt.ids).toEqual(edited.ids);
  expect(maxAbsDiff(rebuilt.logits, edited.logits)).toBeLessThan(LOGIT_TOLERANCE);
  expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'))).toMatchObject({ model_type: 'qwen2', attention_bias: true, tie_word_embeddings: false });
});

test('a hub repository as laid out: onnx/model.onnx with its weights in model.onnx_data, config and tokenizer one folder up', async () => {
  await ensureDemoPacks();
  const hub = join(work, 'hub-repository');
  mkdirSync(join(hub, 'onnx'), { recursive: true });
  writeModel(readModel(join(HF_EXPORTS, 'stories260k-3l-hf', 'model.onnx')), join(hub, 'onnx', 'model.onnx'), { externalData: true });
  expect(existsSync(join(hub, 'onnx', 'model.onnx_data'))).toBe(true);
  for (const f of ['config.json', 'generation_config.json']) copyFileSync(join(HF_EXPORTS, 'stories260k-3l-hf', f), join(hub, f));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(DEMO.cloudPack, f), join(hub, f));
  const out = join(work, 'hub-repository-pack');
  const result = await optimizeHubExport({ input: hub, output: out, layout: 'plain' });
  expect(result.modelPath).toBe(join(hub, 'onnx', 'model.onnx'));
  expect(result.copied).toEqual(['generation_config.json', 'tokenizer.json', 'tokenizer_config.json']);
  const [exported, rebuilt] = [await exportRun('stories260k-3l-hf'), await greedy(out)];
  expect(rebuilt.ids).toEqual(exported.ids);
  expect(maxAbsDiff(rebuilt.logits, exported.logits)).toBeLessThan(LOGIT_TOLERANCE);
});

/** A folder with the 5-layer config.json and a graph that is no hub export: y = x + 1, or one GroupQueryAttention node. */
function foreignGraph(name: string, fused: boolean): string {
  const dir = join(work, name);
  mkdirSync(dir);
  const g = new GraphBuilder(name);
  const x = g.input('x', DataType.FLOAT, [1, 1, 8]);
  const y = fused ? g.contribOps('GroupQueryAttention', [x, x, x], { num_heads: 1, kv_num_heads: 1 }, 3)[0]! : g.op('Add', [x, g.floats('one', [1], [1])]);
  g.output(y, 'y', DataType.FLOAT, [1, 1, 8]);
  writeModel(g.toModel(), join(dir, 'model.onnx'));
  copyFileSync(join(HF_EXPORTS, 'stories260k-hf', 'config.json'), join(dir, 'config.json'));
  return dir;
}

describe('refusals (INVALID_ARGUMENT naming what was expected and found) and failures leave no output', () => {
  const q = '/m/model/layers.0';
  const cases: [string, () => string, string][] = [
    [
      'a q4 export',
      () => join(HF_EXPORTS, 'stories260k-hf', 'model_q4.onnx'),
      `a quantized export (com.microsoft MatMulNBits at ${q}/self_attn/q_proj/MatMul_Q4); optimize the fp32 export, then \`models quantize\``,
    ],
    [
      'an int8 export',
      () => join(HF_EXPORTS, 'stories260k-3l-hf', 'model_quantized.onnx'),
      'a quantized export (DequantizeLinear at /m/model/embed_tokens/Gather_output_0_DequantizeLinear); optimize the fp32 export, then `models quantize`',
    ],
    [
      'a graph that is no decoder',
      () => foreignGraph('not-a-decoder', false),
      'no decoder layers found: expected nodes named like /model/layers.0/self_attn/q_proj/MatMul',
    ],
    [
      'a graph already in the fused layout',
      () => foreignGraph('already-fused', true),
      "already in onnxruntime's fused layout (com.microsoft GroupQueryAttention at ",
    ],
    [
      'a missing layer (the 3-layer graph, the 5-layer config)',
      () => editedHub(work, 'missing-layer', { modelFrom: 'stories260k-3l-hf', configFrom: 'stories260k-hf' }),
      'config.json has num_hidden_layers 5, but layers 3, 4 are missing (the graph has layers 0, 1, 2)',
    ],
    [
      'an extra layer (the 5-layer graph, the 3-layer config)',
      () => editedHub(work, 'extra-layer', { modelFrom: 'stories260k-hf', configFrom: 'stories260k-3l-hf' }),
      'config.json has num_hidden_layers 3, but the graph has layers 0, 1, 2, 3, 4',
    ],
    [
      'an unknown architecture',
      () => editedHub(work, 'gpt2', { modelFrom: 'stories260k-3l-hf', config: (c) => (c.model_type = 'gpt2') }),
      'model_type "gpt2" is not one this tool rewrites (expected llama or qwen2',
    ],
    [
      'a weight of another shape than config.json says',
      () => editedHub(work, 'narrow-mlp', { modelFrom: 'stories260k-3l-hf', config: (c) => (c.intermediate_size = 128) }),
      `${q}/mlp/gate_proj/MatMul: weight onnx::MatMul_975 is [64, 172], expected [64, 128] for /model/layers.0/mlp/gate_proj/ from config.json`,
    ],
    [
      "another rotary base than the graph's",
      () =>
        editedHub(work, 'rope-theta', { modelFrom: 'stories260k-3l-hf', config: (c) => (c.rope_parameters = { rope_type: 'default', rope_theta: 500000 }) }),
      "the rotary frequencies [1.000, 0.1000, 0.01000, 0.001000] are not rope_theta 500000's for head_dim 8 ([1.000, 0.03761, 0.001414, 0.00005318])",
    ],
    [
      'a scaled rotary embedding',
      () => editedHub(work, 'rope-llama3', { modelFrom: 'stories260k-3l-hf', config: (c) => (c.rope_parameters = { rope_type: 'llama3', rope_theta: 10000 }) }),
      'rope_parameters.rope_type is "llama3": only the default rotary embedding is rewritten',
    ],
    [
      'a bias on o_proj (Llama with attention_bias)',
      () => editedHub(work, 'o-bias', { modelFrom: 'stories260k-3l-hf', graph: (m) => addProjectionBiases(m, ['o']) }),
      'model/layers.0/self_attn/o_proj has a bias (/m/model/layers.0/self_attn/o_proj/Add), which the decoder graph does not have',
    ],
    [
      'a bias on q_proj alone',
      () => editedHub(work, 'q-bias', { modelFrom: 'stories260k-3l-hf', graph: (m) => addProjectionBiases(m, ['q']) }),
      'q/k/v biases must be on all three projections of every layer, or on none; found layer 0: q_proj; layer 1: q_proj; layer 2: q_proj',
    ],
  ];

  test.each(cases)('%s', async (_name, input, message) => {
    const inputPath = input();
    const output = join(work, `refused-${readdirSync(work).length}`);
    const before = readdirSync(work).sort();
    await expect(optimizeHubExport({ input: inputPath, output, layout: 'plain' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(message),
    });
    expect(existsSync(output)).toBe(false);
    expect(readdirSync(work).sort()).toEqual(before);
  });

  test('a refused rebuild leaves the pack already at --out as it was', async () => {
    const output = join(work, 'kept-pack');
    await optimizeHubExport({ input: join(HF_EXPORTS, 'stories260k-3l-hf'), output, layout: 'plain' });
    const bytes = readFileSync(join(output, 'model.onnx'));
    const q4: OptimizeOptions = { input: join(HF_EXPORTS, 'stories260k-3l-hf', 'model_q4.onnx'), output, layout: 'plain' };
    await expect(optimizeHubExport(q4)).rejects.toThrow('a quantized export');
    expect(readFileSync(join(output, 'model.onnx'))).toEqual(bytes);
    expect(readdirSync(work).filter((f) => f.includes('.partial-'))).toEqual([]);
  });

  test('a failure while the pack is being written (a tokenizer.json that is a folder) leaves neither the pack nor its temporary folder', async () => {
    const hub = editedHub(work, 'unreadable-tokenizer', { modelFrom: 'stories260k-3l-hf' });
    mkdirSync(join(hub, 'tokenizer.json'));
    const output = join(work, 'unreadable-tokenizer-pack');
    await expect(optimizeHubExport({ input: hub, output, layout: 'plain' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringContaining(`${join(hub, 'tokenizer.json')}: cannot read (EISDIR`),
    });
    expect(existsSync(output)).toBe(false);
    expect(readdirSync(work).filter((f) => f.includes('.partial-'))).toEqual([]);
  });

  test('--out naming the hub folder, or a folder above it, is refused before anything is read', async () => {
    const parent = join(work, 'own-output');
    mkdirSync(parent);
    const hub = editedHub(parent, 'hub', { modelFrom: 'stories260k-3l-hf' });
    for (const output of [hub, parent]) {
      await expect(optimizeHubExport({ input: hub, output })).rejects.toThrow(`--out ${output} holds the export being read; write the pack to a new folder`);
    }
    expect(readdirSync(hub).sort()).toEqual(['config.json', 'model.onnx']);
  });
});

test('bun run models optimize: the summary on success, the refusal on stderr with exit code 1', async () => {
  const run = async (args: string[]) => {
    const child = Bun.spawn(['bun', 'src/tools/models/cli.ts', 'optimize', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe', timeout: 60_000 });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    return { stdout, stderr, code };
  };
  const out = join(work, 'cli-pack');
  const ok = await run(['--in', join(HF_EXPORTS, 'stories260k-3l-hf', 'model_fp16.onnx'), '--out', out, '--layout', 'plain']);
  expect(ok.code).toBe(0);
  expect(ok.stdout).toContain(`wrote ${out} (plain layout)`);
  expect(ok.stdout).toContain('llama: 3 layers, hidden 64, 8 heads / 4 KV heads of 8, vocabulary 512, tied embedding');
  expect(ok.stdout).toContain('float16 weights widened to float32');
  const refused = await run(['--in', join(HF_EXPORTS, 'stories260k-3l-hf', 'model_q4.onnx'), '--out', join(work, 'cli-refused')]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('optimize the fp32 export, then `models quantize`');
  expect(existsSync(join(work, 'cli-refused'))).toBe(false);
});
