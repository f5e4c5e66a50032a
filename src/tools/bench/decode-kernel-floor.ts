/**
 * The floor of a decode step on this runtime: the pack's weight products alone (every MatMulNBits, and
 * every MatMul or Gemm whose weight is an initializer: the same nodes, attributes and weights as the
 * model's), each fed one row from a graph input of its width, run as one session. Nothing else of a step
 * is there (norms, attention, rotary, the cache, the logits' copy out), so no rewrite of the graph around
 * these kernels can decode faster than they run; set beside llama.cpp's whole step (`bench decode --peer`)
 * it says how much of a gap any graph could close, and how much is the kernels'.
 *
 * The graph goes to onnxruntime as bytes, its weights still references into the pack's external data file,
 * which onnxruntime maps from the pack's folder (`session.model_external_initializers_file_folder_path`):
 * nothing is written, so a read-only pack works, and the weights are not held twice.
 *
 * @example
 * const floor = await WeightKernels.open(pack.modelPath, 2);
 * const ms = await floor.time(8); // median ms of one pass through every weight product
 * await floor.release();
 */
import { dirname } from 'node:path';
import { toBinary } from '@bufbuild/protobuf';
import { ModelProtoSchema, type NodeProto, type TensorProto } from 'onnx-buf';
import { AppError } from '../../shared/errors.ts';
import { DataType, valueInfo } from '../../shared/model/onnx-graph.ts';
import { median } from '../../shared/statistics.ts';
import { ort, type InferenceSession, type OrtTensor } from '../../shared/model/ort.ts';
import { readModel } from '../models/onnx-file.ts';
import { intAttribute } from '../models/graph-index.ts';

/** A weight product of the model and the width of what it multiplies (K). */
interface WeightNode {
  node: NodeProto;
  k: number;
}

/** `node`'s K when it multiplies a row by a weight initializer; undefined for any other node. */
function weightWidth(node: NodeProto, initializers: ReadonlyMap<string, TensorProto>): number | undefined {
  if (node.opType === 'MatMulNBits') return intAttribute(node, 'K');
  const weight = initializers.get(node.input[1] ?? '');
  if (!weight || weight.dims.length !== 2) return undefined;
  if (node.opType === 'MatMul') return Number(weight.dims[0]);
  if (node.opType === 'Gemm') return Number(weight.dims[intAttribute(node, 'transB') ? 1 : 0]);
  return undefined;
}

/** The model at `modelPath` cut down to its weight products, each reading input `x<K>` of shape [1, K]. */
export function weightKernelsModel(modelPath: string): { model: ReturnType<typeof readModel>; widths: number[]; nodes: number } {
  const model = readModel(modelPath);
  const graph = model.graph!;
  const initializers = new Map(graph.initializer.map((t) => [t.name, t]));
  const kept: WeightNode[] = [];
  for (const node of graph.node) {
    const k = weightWidth(node, initializers);
    if (k !== undefined) kept.push({ node, k });
  }
  if (kept.length === 0) throw new AppError('INVALID_ARGUMENT', `${modelPath}: no weight products (MatMulNBits, or MatMul/Gemm on an initializer) to time`);
  const needed = new Set(kept.flatMap(({ node }) => node.input.slice(1)));
  for (const { node, k } of kept) node.input[0] = `x${k}`;
  const widths = [...new Set(kept.map((w) => w.k))];
  graph.node = kept.map((w) => w.node);
  graph.initializer = graph.initializer.filter((t) => needed.has(t.name));
  graph.input = widths.map((k) => valueInfo(`x${k}`, DataType.FLOAT, [1, k]));
  graph.output = kept.map(({ node }) => valueInfo(node.output[0]!, DataType.FLOAT));
  graph.valueInfo = [];
  return { model, widths, nodes: kept.length };
}

export class WeightKernels {
  private constructor(
    private readonly session: InferenceSession,
    private readonly feeds: Record<string, OrtTensor>,
    /** One output to fetch: onnxruntime runs every node anyway, and copies out only what is fetched. */
    private readonly fetch: string,
    readonly nodes: number,
  ) {}

  static async open(modelPath: string, threads: number): Promise<WeightKernels> {
    const { model, widths, nodes } = weightKernelsModel(modelPath);
    const session = await ort.InferenceSession.create(toBinary(ModelProtoSchema, model), {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      extra: { session: { model_external_initializers_file_folder_path: dirname(modelPath) } },
    });
    const feeds = Object.fromEntries(
      widths.map((k) => [
        `x${k}`,
        new ort.Tensor(
          'float32',
          Float32Array.from({ length: k }, (_, i) => Math.sin(i) / 8),
          [1, k],
        ),
      ]),
    );
    return new WeightKernels(session, feeds, model.graph!.output[0]!.name, nodes);
  }

  /** Median milliseconds of `runs` passes through every weight product, after one untimed. */
  async time(runs: number): Promise<number> {
    const times: number[] = [];
    for (let i = 0; i <= runs; i++) {
      const t = performance.now();
      const out = await this.session.run(this.feeds, [this.fetch]);
      if (i > 0) times.push(performance.now() - t);
      for (const v of Object.values(out)) v.dispose();
    }
    return median(times);
  }

  async release(): Promise<void> {
    for (const t of Object.values(this.feeds)) t.dispose();
    await this.session.release();
  }
}
