/**
 * `bench decode --kernel-floor` (src/tools/bench/decode-kernel-floor.ts): the pack cut down to its weight
 * products runs exactly the model's nodes on the model's weights, writes nothing into the pack's folder,
 * and the bench reports the floor per round.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { toBinary } from '@bufbuild/protobuf';
import { ModelProtoSchema } from 'onnx-buf';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { DataType, GraphBuilder } from '../src/shared/model/onnx-graph.ts';
import { ort } from '../src/shared/model/ort.ts';
import { PROJECT_ROOT, TRUNCATED_DEMO } from '../src/shared/paths.ts';
import { WeightKernels, weightKernelsModel } from '../src/tools/bench/decode-kernel-floor.ts';
import { initializerFloats } from '../src/tools/models/initializer-data.ts';
import { readModel, writeModel } from '../src/tools/models/onnx-file.ts';
import { quantizePack } from '../src/tools/models/quantize.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

let work: string;
const packs = { fp32: '', q4: '' };

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'kernel-floor-'));
  packs.fp32 = join(work, 'fused');
  packs.q4 = join(work, 'fused-q4');
  await writeRandomPack({ preset: 'tiny-qwen2', out: packs.fp32, seed: 5, hiddenStatesOutput: true, layout: 'fused' });
  await quantizePack({ input: packs.fp32, output: packs.q4, dtype: 'q4', embedding: true });
}, 120_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('weightKernelsModel', () => {
  test('keeps exactly the weight products (every MatMulNBits of a q4 pack), each fed from an input of its width, with only their weights', () => {
    const { modelPath } = loadModelPack(packs.q4);
    const full = readModel(modelPath).graph!;
    const products = full.node.filter((n) => n.opType === 'MatMulNBits');
    const { model, widths, nodes } = weightKernelsModel(modelPath);
    const graph = model.graph!;
    expect(nodes).toBe(products.length);
    expect(graph.node.map((n) => n.name)).toEqual(products.map((n) => n.name));
    expect(graph.input.map((i) => i.name).sort()).toEqual(widths.map((k) => `x${k}`).sort());
    for (const node of graph.node) expect(widths.map((k) => `x${k}`)).toContain(node.input[0]!);
    const weights = new Set(products.flatMap((n) => n.input.slice(1)));
    expect(new Set(graph.initializer.map((t) => t.name))).toEqual(weights);
  });

  test("an fp32 pack keeps its MatMul and Gemm nodes on weights, and each computes x · W with the pack's weights", async () => {
    const { modelPath } = loadModelPack(packs.fp32);
    const full = readModel(modelPath).graph!;
    const initializers = new Set(full.initializer.map((t) => t.name));
    const products = full.node.filter((n) => (n.opType === 'MatMul' || n.opType === 'Gemm') && initializers.has(n.input[1]!));
    const { model, widths, nodes } = weightKernelsModel(modelPath);
    expect(nodes).toBe(products.length);
    expect(nodes).toBeGreaterThan(0);
    // The first MatMul on a weight, run from the cut-down graph (its weights read from the pack's folder): x · W as in JavaScript.
    const node = model.graph!.node.find((n) => n.opType === 'MatMul')!;
    const weight = full.initializer.find((t) => t.name === node.input[1])!;
    const [k, n] = weight.dims.map(Number) as [number, number];
    const w = initializerFloats(weight, modelPath);
    const input = (width: number) => Float32Array.from({ length: width }, (_, i) => Math.sin(i) / 8);
    const session = await ort.InferenceSession.create(toBinary(ModelProtoSchema, model), {
      intraOpNumThreads: 1,
      extra: { session: { model_external_initializers_file_folder_path: packs.fp32 } },
    });
    try {
      const out = await session.run(Object.fromEntries(widths.map((width) => [`x${width}`, new ort.Tensor('float32', input(width), [1, width])])), [
        node.output[0]!,
      ]);
      const got = out[node.output[0]!]!.data as Float32Array;
      const x = input(k);
      for (let col = 0; col < n; col++) {
        let sum = 0;
        for (let row = 0; row < k; row++) sum += x[row]! * w[row * n + col]!;
        expect(Math.abs(got[col]! - sum)).toBeLessThan(1e-5 * (1 + Math.abs(sum)));
      }
    } finally {
      await session.release();
    }
  });

  test("WeightKernels times a pass through them and writes nothing into the pack's folder", async () => {
    const before = readdirSync(packs.q4).sort();
    const floor = await WeightKernels.open(loadModelPack(packs.q4).modelPath, 1);
    try {
      expect(floor.nodes).toBe(weightKernelsModel(loadModelPack(packs.q4).modelPath).nodes);
      expect(readdirSync(packs.q4).sort()).toEqual(before);
      expect(await floor.time(2)).toBeGreaterThan(0);
    } finally {
      await floor.release();
    }
  });

  test('a model without weight products is refused', async () => {
    const dir = join(work, 'no-weights');
    mkdirSync(dir);
    const g = new GraphBuilder('no-weights');
    g.output(g.op('Relu', [g.input('x', DataType.FLOAT, [1, 4])]), 'y', DataType.FLOAT, [1, 4]);
    writeModel(g.toModel(), join(dir, 'model.onnx'));
    await expect(WeightKernels.open(join(dir, 'model.onnx'), 1)).rejects.toThrow('no weight products');
  });
});

describe('bun run bench decode --kernel-floor', () => {
  test('each round gets its floor and the JSON carries their median', async () => {
    await ensureDemoPacks();
    const proc = Bun.spawn(
      [
        'bun',
        'src/tools/bench/cli.ts',
        'decode',
        '--pack',
        TRUNCATED_DEMO.edgePack,
        '--kernel-floor',
        '--prompt-tokens',
        '20',
        '--steps',
        '8',
        '--rounds',
        '2',
        '--threads',
        '1',
        '--bandwidth-gb-s',
        '10',
        '--json',
      ],
      { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' },
    );
    const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(json.rounds).toHaveLength(2);
    for (const round of json.rounds) expect(round.kernel_floor_ms).toBeGreaterThan(0);
    const floors = json.rounds.map((r: { kernel_floor_ms: number }) => r.kernel_floor_ms).sort((a: number, b: number) => a - b);
    expect(json.kernel_floor_ms).toBeCloseTo((floors[0] + floors[1]) / 2, 9);
    expect(stdout).toContain('kernel floor (the weight products alone)');
  });
});
