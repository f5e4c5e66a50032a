/**
 * `models inspect` / `models expose-hidden` on the real hub exports (a pack folder as well as a file),
 * how a decoder export's declarations are read (and refused), and float16 decoding.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { AttributeProto_AttributeType, AttributeProtoSchema, NodeProtoSchema, ValueInfoProtoSchema } from 'onnx-buf';
import { parseShimConfig } from '../src/cloud/config.ts';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { type DeclaredValue, readDecoderIo } from '../src/shared/model/decoder-io.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { halfBitsToFloat32 } from '../src/shared/model/float-tensors.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { exposeHiddenStates } from '../src/tools/models/expose-hidden.ts';
import { parseEvalOptions } from '../src/tools/eval/eval-options.ts';
import { inspectPath } from '../src/tools/models/inspect-model.ts';
import { readModel, writeModel } from '../src/tools/models/onnx-file.ts';
import { DataType, valueInfo } from '../src/shared/model/onnx-graph.ts';
import { HF_EXPORTS, VARIANTS } from './helpers/hub-export-packs.ts';

const CLI = resolve(import.meta.dir, '..', 'src/tools/models/cli.ts');
const HUB_3L = join(HF_EXPORTS, 'stories260k-3l-hf');
const cli = (...args: string[]) => Bun.spawnSync([process.execPath, CLI, ...args], { stdout: 'pipe', stderr: 'pipe' });

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hub-export-tools-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('expose-hidden on every variant', () => {
  test.each([
    ['model.onnx', '/m/lm_head/MatMul (MatMul)'],
    ['model_fp16.onnx', '/m/lm_head/MatMul (MatMul)'],
    ['model_q4.onnx', '/m/lm_head/MatMul_Q4 (MatMulNBits)'],
    ['model_quantized.onnx', '/m/lm_head/MatMul_quant (MatMulInteger)'],
  ])('%s: the final norm output, found behind head %s', async (file, head) => {
    const out = join(dir, 'each', file);
    const r = await exposeHiddenStates({ input: join(HUB_3L, file), output: out });
    expect(r).toMatchObject({ status: 'added', tensor: '/m/model/norm/Mul_1_output_0', head, output: out });
    // The int8 head's input is DynamicQuantizeLinear's float input, not the quantized uint8 tensor.
    expect(readModel(out).graph!.output.map((o) => o.name)).toContain('hidden_states');
  });

  test("int8: the exposed hidden state is the fp32 one up to the quantized layers' error", async () => {
    const pack = join(dir, 'pack-3l');
    mkdirSync(pack);
    for (const f of ['config.json', 'generation_config.json']) copyFileSync(join(HUB_3L, f), join(pack, f));
    const hidden: Record<string, Float32Array> = {};
    for (const file of ['model.onnx', 'model_quantized.onnx']) {
      await exposeHiddenStates({ input: join(HUB_3L, file), output: pack });
      const model = await DecoderModel.load(loadModelPack(pack, file));
      const seq = model.newSequence();
      hidden[file] = (await seq.append([1, 403, 407, 261, 378])).hidden;
      seq.dispose();
      await model.release();
    }
    const [fp32, int8] = [hidden['model.onnx']!, hidden['model_quantized.onnx']!];
    expect(fp32).toHaveLength(64);
    let max = 0;
    fp32.forEach((v, i) => (max = Math.max(max, Math.abs(v - int8[i]!))));
    // Measured max |Δ| 0.127 on a hidden state of norm 18.3 (5-token prompt): close, and not the same tensor.
    expect(max).toBeGreaterThan(0);
    expect(max).toBeLessThan(0.3);
  });

  test('a pack folder as --in means its model.onnx; a folder as --out keeps the name', () => {
    const out = join(dir, 'cli-out');
    mkdirSync(out);
    const r = cli('expose-hidden', '--in', HUB_3L, '--out', out);
    expect(r.stderr.toString()).toBe('');
    expect(r.stdout.toString()).toMatch(/^wrote .*cli-out\/model\.onnx: hidden_states \[batch_size, sequence_length, 64\] = \/m\/model\/norm\/Mul_1_output_0/);
    expect(readdirSync(out)).toEqual(['model.onnx']);
  });
});

test('external data works for a variant: model_fp16.onnx + model_fp16.onnx_data, exposed and decoded like the single file', async () => {
  const source = join(dir, 'external-source');
  const pack = join(dir, 'external-pack');
  for (const d of [source, pack]) mkdirSync(d);
  for (const f of ['config.json', 'generation_config.json']) copyFileSync(join(HUB_3L, f), join(pack, f));
  writeModel(readModel(join(HUB_3L, 'model_fp16.onnx')), join(source, 'model_fp16.onnx'), { externalData: true });
  const r = await exposeHiddenStates({ input: join(source, 'model_fp16.onnx'), output: pack });
  expect(r.dataFiles).toEqual(['model_fp16.onnx_data']);
  expect(readdirSync(pack).sort()).toEqual(['config.json', 'generation_config.json', 'model_fp16.onnx', 'model_fp16.onnx_data']);
  const single = join(dir, 'single-pack');
  mkdirSync(single);
  for (const f of ['config.json', 'generation_config.json']) copyFileSync(join(HUB_3L, f), join(single, f));
  await exposeHiddenStates({ input: join(HUB_3L, 'model_fp16.onnx'), output: single });
  const greedy = async (packDir: string) => {
    const model = await DecoderModel.load(loadModelPack(packDir, 'model_fp16.onnx'));
    const seq = model.newSequence();
    const ids: number[] = [];
    let { logits, hidden } = await seq.append([1, 403, 407, 261, 378]);
    for (let i = 0; i < 8; i++) {
      const id = logits.indexOf(Math.max(...logits));
      ids.push(id);
      ({ logits, hidden } = await seq.append([id]));
    }
    seq.dispose();
    await model.release();
    return { ids, hidden: Array.from(hidden) };
  };
  const [external, inFile] = [await greedy(pack), await greedy(single)];
  expect(external).toEqual(inFile);
  expect(external.ids).toEqual([432, 261, 261, 284, 303, 397, 397, 397]);
});

describe('heads written other ways', () => {
  /** A pack folder with the 3-layer config and `model` written as model.onnx, hidden state exposed. */
  async function packOf(name: string, model: ReturnType<typeof readModel>): Promise<{ dir: string; head: string | undefined }> {
    const packDir = join(dir, name);
    mkdirSync(packDir);
    for (const f of ['config.json', 'generation_config.json']) copyFileSync(join(HUB_3L, f), join(packDir, f));
    writeModel(model, join(packDir, 'source.onnx'));
    const r = await exposeHiddenStates({ input: join(packDir, 'source.onnx'), output: join(packDir, 'model.onnx') });
    expect(r.tensor).toBe('/m/model/norm/Mul_1_output_0');
    return { dir: packDir, head: r.head };
  }

  async function firstSteps(packDir: string): Promise<{ ids: number[]; io: DecoderModel['io'] }> {
    const model = await DecoderModel.load(loadModelPack(packDir));
    const seq = model.newSequence();
    const ids: number[] = [];
    let { logits } = await seq.append([1, 403, 407, 261, 378]);
    for (let i = 0; i < 6; i++) {
      ids.push(logits.indexOf(Math.max(...logits)));
      ({ logits } = await seq.append([ids.at(-1)!]));
    }
    seq.dispose();
    await model.release();
    return { ids, io: model.io };
  }

  test('an fp16 head behind a Cast to float32 logits (keep_io_types-style): found, and the edge reads float32 logits next to a float16 cache', async () => {
    const model = readModel(join(HUB_3L, 'model_fp16.onnx'));
    const graph = model.graph!;
    const head = graph.node.find((n) => n.output[0] === 'logits')!;
    head.output[0] = 'logits_half';
    graph.node.push(
      create(NodeProtoSchema, {
        opType: 'Cast',
        name: '/logits/Cast',
        input: ['logits_half'],
        output: ['logits'],
        attribute: [create(AttributeProtoSchema, { name: 'to', type: AttributeProto_AttributeType.INT, i: BigInt(DataType.FLOAT) })],
      }),
    );
    graph.output[graph.output.findIndex((o) => o.name === 'logits')] = valueInfo('logits', DataType.FLOAT, ['batch_size', 'sequence_length', 512]);
    const pack = await packOf('cast-head', model);
    expect(pack.head).toBe('/m/lm_head/MatMul (MatMul)');
    const run = await firstSteps(pack.dir);
    expect(run.io).toMatchObject({ cache: 'float16', logits: 'float32', hidden: 'float16' });
    expect(run.ids).toEqual([432, 261, 261, 284, 303, 397]);
  });

  test('a tied head (Transpose of the embedding): found through the Transpose, same ids as the untied file', async () => {
    const model = readModel(join(HUB_3L, 'model.onnx'));
    const graph = model.graph!;
    const head = graph.node.find((n) => n.output[0] === 'logits')!;
    const untied = head.input[1]!;
    head.input[1] = '/tied/embed_T';
    graph.node.splice(
      graph.node.indexOf(head),
      0,
      create(NodeProtoSchema, { opType: 'Transpose', name: '/tied/Transpose', input: ['m.model.embed_tokens.weight'], output: ['/tied/embed_T'] }),
    );
    graph.initializer = graph.initializer.filter((t) => t.name !== untied);
    const pack = await packOf('tied-head', model);
    expect(pack.head).toBe('/m/lm_head/MatMul (MatMul)');
    const described = inspectPath(join(pack.dir, 'source.onnx'))[0]!.candidates;
    expect(described).toMatchObject([{ chosen: true, weight: '/tied/embed_T', weightShape: [64, 512] }]);
    expect((await firstSteps(pack.dir)).ids).toEqual([432, 261, 261, 284, 303, 397]);
  });
});

describe('bad input: one error line, nothing written', () => {
  const expectRefused = (args: string[], message: RegExp, out: string) => {
    const r = cli(...args);
    const stderr = r.stderr.toString().trim();
    expect(r.exitCode).toBe(1);
    expect(stderr).toMatch(message);
    expect(stderr.split('\n')).toHaveLength(1);
    expect(existsSync(out) ? readdirSync(out) : []).toEqual([]);
  };

  test('not a decoder (logits is no graph output) is refused', () => {
    const out = join(dir, 'bad-out-1');
    mkdirSync(out);
    const notDecoder = join(dir, 'not-decoder.onnx');
    const model = readModel(join(HUB_3L, 'model.onnx'));
    model.graph!.output = model.graph!.output.filter((o) => o.name !== 'logits');
    writeModel(model, notDecoder);
    expectRefused(['expose-hidden', '--in', notDecoder, '--out', out], /^error: .*no graph output named logits/, out);
  });

  test('no vocabulary-sized head: named by --node as a weight', () => {
    const out = join(dir, 'bad-out-2');
    mkdirSync(out);
    expectRefused(
      ['expose-hidden', '--in', join(HUB_3L, 'model.onnx'), '--out', out, '--node', 'm.model.norm.weight'],
      /^error: .*m\.model\.norm\.weight is a weight, not an activation/,
      out,
    );
  });

  test('an unreadable file, a folder without model.onnx, a file that is not ONNX', () => {
    const out = join(dir, 'bad-out-3');
    mkdirSync(out);
    expectRefused(['expose-hidden', '--in', join(dir, 'missing.onnx'), '--out', out], /^error: .*missing\.onnx: cannot read/, out);
    const variantsOnly = join(dir, 'variants-only');
    mkdirSync(variantsOnly);
    copyFileSync(join(HUB_3L, 'model_q4.onnx'), join(variantsOnly, 'model_q4.onnx'));
    expectRefused(['expose-hidden', '--in', variantsOnly, '--out', out], /^error: .*no model\.onnx in this folder; name one of model_q4\.onnx as --in/, out);
    const text = join(dir, 'text.onnx');
    writeFileSync(text, 'not a model');
    expectRefused(['expose-hidden', '--in', text, '--out', out], /^error: .*text\.onnx: not an ONNX model/, out);
    expectRefused(['inspect', join(dir, 'missing')], /^error: .*missing: cannot read/, out);
  });
});

describe('inspect', () => {
  test('a hub folder: every variant, with how the edge runs it', () => {
    const r = cli('inspect', HUB_3L);
    const text = r.stdout.toString();
    expect(r.exitCode).toBe(0);
    const sections = text.split('\n\n/').length;
    expect(sections).toBe(VARIANTS.length);
    expect(text).toContain('KV cache float16 (3 layers, kept in float16 between steps)');
    expect(text).toContain('logits float16 (converted to float32 once per step)');
    expect(text).toMatch(
      /\* \/m\/model\/norm\/Mul_1_output_0\s+float32\s+\[unk__\d+, unk__\d+, 64\]\s+→ \/m\/lm_head\/MatMul_quant \(MatMulInteger\), weight onnx::MatMul_1034_quantized \[64, 512\]/,
    );
    expect(text).toContain('hidden_states none (run models expose-hidden to add it)');
  });

  test('the reading per file', () => {
    const edge = Object.fromEntries(inspectPath(HUB_3L).map((d) => [d.path.split('/').at(-1), 'io' in d.edge ? d.edge.io.cache : d.edge.refused]));
    expect(edge).toEqual({ 'model.onnx': 'float32', 'model_fp16.onnx': 'float16', 'model_q4.onnx': 'float32', 'model_quantized.onnx': 'float32' });
  });
});

describe("reading a decoder export's declarations", () => {
  const base = (): { inputs: DeclaredValue[]; outputs: DeclaredValue[] } => ({
    inputs: [
      { name: 'input_ids', type: 'int32' },
      { name: 'past_key_values.0.key', type: 'float16' },
      { name: 'past_key_values.0.value', type: 'float16' },
    ],
    outputs: [
      { name: 'logits', type: 'float32' },
      { name: 'present.0.key', type: 'float16' },
      { name: 'present.0.value', type: 'float16' },
    ],
  });
  const read = (d: { inputs: DeclaredValue[]; outputs: DeclaredValue[] }) => readDecoderIo({ where: 'm.onnx', numLayers: 1, ...d });

  test('int32 ids, no mask, no position_ids, a float16 cache', () => {
    expect(read(base())).toEqual({
      ids: 'int32',
      logitsToKeep: false,
      cache: 'float16',
      logits: 'float32',
      pastNames: ['past_key_values.0.key', 'past_key_values.0.value'],
      layout: 'plain',
      newKeyValues: false,
    });
  });

  test('num_logits_to_keep: an int64 scalar is fed (logits of the last position), another type refused', () => {
    const keep = base();
    keep.inputs.push({ name: 'num_logits_to_keep', type: 'int64' });
    expect(read(keep).logitsToKeep).toBe(true);
    const int32 = base();
    int32.inputs.push({ name: 'num_logits_to_keep', type: 'int32' });
    expect(() => read(int32)).toThrow('m.onnx: input num_logits_to_keep is int32; the edge feeds it as an int64 scalar');
  });

  test.each([
    ['use_cache_branch', 'bool', /m\.onnx: input use_cache_branch is not fed by the edge \(a bool choosing the merged decoder's branch/],
    ['pixel_values', 'float32', /input pixel_values is not fed by the edge \(an input the edge does not know how to fill\)/],
  ])('an input the edge does not feed (%s) is refused by name', (name, type, message) => {
    const d = base();
    d.inputs.push({ name, type });
    expect(() => read(d)).toThrow(message);
  });

  test('a cache of other types, mixed types, a missing layer, float ids', () => {
    const bf16 = base();
    bf16.inputs[1] = { name: 'past_key_values.0.key', type: 'bfloat16' };
    expect(() => read(bf16)).toThrow(/input past_key_values\.0\.key is bfloat16; the edge reads float32 or float16/);
    const mixed = base();
    mixed.outputs[1] = { name: 'present.0.key', type: 'float32' };
    expect(() => read(mixed)).toThrow(/mixes float32 and float16/);
    expect(() => readDecoderIo({ where: 'm.onnx', numLayers: 2, ...base() })).toThrow(
      /KV cache of 2 layers .*missing past_key_values\.1\.key, past_key_values\.1\.value/,
    );
    const floatIds = base();
    floatIds.inputs[0] = { name: 'input_ids', type: 'float32' };
    expect(() => read(floatIds)).toThrow(/input input_ids is float32; the edge feeds int32 or int64/);
  });

  test('a real export with an extra input is refused when it loads, not on the first generation', async () => {
    const pack = join(dir, 'extra-input');
    mkdirSync(pack);
    for (const f of ['config.json', 'generation_config.json']) copyFileSync(join(HUB_3L, f), join(pack, f));
    const model = readModel(join(HUB_3L, 'model.onnx'));
    model.graph!.input.push(create(ValueInfoProtoSchema, valueInfo('use_cache_branch', DataType.BOOL, [1])));
    writeModel(model, join(pack, 'model.onnx'));
    await expect(DecoderModel.load(loadModelPack(pack))).rejects.toThrow(/input use_cache_branch is not fed by the edge/);
  });
});

test('float16 bits decode exactly', () => {
  const bits = Uint16Array.from([0x0000, 0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x7c00, 0xfc00]);
  expect(Array.from(halfBitsToFloat32(bits))).toEqual([0, 1, -2, 0.333251953125, 65504, 2 ** -24, Infinity, -Infinity]);
  expect(halfBitsToFloat32(Uint16Array.from([0x7e00]))[0]).toBeNaN();
});

test('the variant is a setting of the edge, the shim and bun run eval; a path is refused', () => {
  expect(parseEvalOptions(['--dataset', 'x.txt', '--edge-model-file', 'model_q4.onnx'])).toMatchObject({ edgeModelFile: 'model_q4.onnx' });
  expect(parseEvalOptions(['--dataset', 'x.txt']).edgeModelFile).toBeUndefined();
  expect(parseEdgeConfig(['--edge-model-file', 'model_q4.onnx'], {}).edgeModelFile).toBe('model_q4.onnx');
  expect(parseEdgeConfig([], { EDGE_EDGE_MODEL_FILE: 'model_fp16.onnx' }).edgeModelFile).toBe('model_fp16.onnx');
  expect(parseEdgeConfig([], {}).edgeModelFile).toBe('model.onnx');
  expect(() => parseEdgeConfig(['--edge-model-file', '../x/model.onnx'], {})).toThrow(/--edge-model-file must be a \.onnx file name inside the pack folder/);
  expect(parseShimConfig(['--model-file', 'model_quantized.onnx'], {}).modelFile).toBe('model_quantized.onnx');
  expect(() => parseShimConfig(['--model-file', 'weights.bin'], {})).toThrow(/--model-file must be a \.onnx file name/);
});
