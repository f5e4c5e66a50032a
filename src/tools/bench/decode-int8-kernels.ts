/**
 * `bench int8-kernels`: which 8-bit form onnxruntime's CPU kernels run faster at batch 1, the choice
 * behind `models quantize --dtype int8`: MatMulNBits with bits=8 (block-wise weights; `models quantize`
 * writes it with accuracy_level 4, activations quantized per row and block) or DynamicQuantizeLinear +
 * MatMulInteger (uint8 activations quantized per call over the whole tensor, per-column 8-bit weights,
 * the earlier int8 form), and MatMulNBits with and without accuracy_level 4. All run the same chain of Qwen2.5-0.5B MLP
 * matrices (896 → 4864 → 896, `pairs` times, so the weights do not fit in cache), next to fp32 MatMul, their
 * passes taking turns so that a shared machine's changing load does not favour one form.
 */
import { availableParallelism } from 'node:os';
import { toBinary } from '@bufbuild/protobuf';
import { ModelProtoSchema, type ModelProto } from 'onnx-buf';
import { percentile } from '../../shared/statistics.ts';
import { ort, type InferenceSession, type OrtTensor } from '../../shared/model/ort.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { DataType, GraphBuilder } from '../../shared/model/onnx-graph.ts';
import { quantizeModel, type QuantizationScheme } from '../models/quantize.ts';

export const USAGE = `int8-kernels [--pairs 4] [--runs 40] [--threads N] [--json]
      ms per batch-1 pass through 896→4864→896 weight pairs: fp32 MatMul, MatMulNBits bits=8 and bits=4,
      DynamicQuantizeLinear + MatMulInteger (the evidence for models quantize --dtype int8: bits=8 accuracy_level=4)`;

const [HIDDEN, INTERMEDIATE] = [896, 4864];

function randomWeights(count: number, seed: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: count }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return (s / 2 ** 30 - 1) * 0.05;
  });
}

function fp32Chain(pairs: number): ModelProto {
  const g = new GraphBuilder('fp32-chain');
  let x = g.input('x', DataType.FLOAT, [1, HIDDEN]);
  for (let p = 0; p < pairs; p++) {
    x = g.op('MatMul', [x, g.floats(`up${p}`, randomWeights(HIDDEN * INTERMEDIATE, 2 * p + 1), [HIDDEN, INTERMEDIATE])]);
    x = g.op('MatMul', [x, g.floats(`down${p}`, randomWeights(INTERMEDIATE * HIDDEN, 2 * p + 2), [INTERMEDIATE, HIDDEN])]);
  }
  g.output(x, 'y', DataType.FLOAT, [1, HIDDEN]);
  return g.toModel();
}

export interface KernelTiming {
  form: string;
  msPerPass: number;
  weightBytes: number;
}

/** Passes before timing; passes one form runs before the next takes its turn. */
const [WARMUP_PASSES, PASSES_PER_TURN] = [3, 5];

/**
 * Median ms per pass of each form, the passes of all forms taking turns (a few at a time) so that load
 * which comes and goes on a shared machine falls on every form alike, not on whichever runs at that moment.
 * Each model is built only when its session is made, so one float32 chain at a time is in memory.
 */
async function timeInterleaved(forms: [string, () => ModelProto][], runs: number, threads: number): Promise<KernelTiming[]> {
  const sessions: InferenceSession[] = [];
  const weightBytes: number[] = [];
  const x = new ort.Tensor('float32', randomWeights(HIDDEN, 99), [1, HIDDEN]);
  const times = forms.map((): number[] => []);
  try {
    for (const [, build] of forms) {
      const model = build();
      weightBytes.push(model.graph!.initializer.reduce((a, t) => a + t.rawData.byteLength, 0));
      sessions.push(
        await ort.InferenceSession.create(toBinary(ModelProtoSchema, model), {
          intraOpNumThreads: threads,
          interOpNumThreads: 1,
          graphOptimizationLevel: 'all',
        }),
      );
    }
    for (const session of sessions) await passes(session, x, WARMUP_PASSES);
    for (let done = 0; done < runs; done += PASSES_PER_TURN) {
      for (const [i, session] of sessions.entries()) times[i]!.push(...(await passes(session, x, Math.min(PASSES_PER_TURN, runs - done))));
    }
  } finally {
    x.dispose();
    for (const session of sessions) await session.release();
  }
  return forms.map(([form], i) => ({ form, msPerPass: percentile(times[i]!, 50), weightBytes: weightBytes[i]! }));
}

async function passes(session: InferenceSession, x: OrtTensor, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    const out = await session.run({ x });
    times.push(performance.now() - t);
    for (const v of Object.values(out)) v.dispose();
  }
  return times;
}

export async function benchInt8Kernels(o: { pairs: number; runs: number; threads: number }): Promise<KernelTiming[]> {
  if (o.pairs < 1 || o.runs < 1 || o.threads < 1) throw new UsageError('--pairs, --runs and --threads must be at least 1');
  const forms: [string, () => ModelProto][] = [['fp32 MatMul', () => fp32Chain(o.pairs)]];
  const schemes: [string, QuantizationScheme][] = [
    ['DynamicQuantizeLinear + MatMulInteger', { kind: 'integer' }],
    ...[8, 4].flatMap((bits) =>
      [undefined, 4].map((accuracyLevel): [string, QuantizationScheme] => [
        `MatMulNBits bits=${bits}${accuracyLevel ? ` accuracy_level=${accuracyLevel}` : ''}`,
        { kind: 'nbits', bits: bits as 4 | 8, blockSize: 32, ...(accuracyLevel ? { accuracyLevel } : {}) },
      ]),
    ),
  ];
  for (const [form, scheme] of schemes) {
    forms.push([
      form,
      () => {
        const model = fp32Chain(o.pairs);
        quantizeModel(model, 'in-memory', scheme);
        return model;
      },
    ]);
  }
  return timeInterleaved(forms, o.runs, o.threads);
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    pairs: { type: 'string' },
    runs: { type: 'string' },
    threads: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const results = await benchInt8Kernels({
    pairs: integerFlag(values, 'pairs', 4)!,
    runs: integerFlag(values, 'runs', 40)!,
    threads: integerFlag(values, 'threads', availableParallelism())!,
  });
  for (const r of results)
    console.log(`${r.form.padEnd(40)} ${r.msPerPass.toFixed(2).padStart(8)} ms/pass  ${(r.weightBytes / 2 ** 20).toFixed(1).padStart(7)} MiB of weights`);
  if (values.json) console.log(JSON.stringify({ results: results.map((r) => ({ form: r.form, ms_per_pass: r.msPerPass, weight_bytes: r.weightBytes })) }));
}
