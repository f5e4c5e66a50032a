/**
 * `models quantize`: a pack whose constant-weight MatMuls (and the Gemm(transB=1) LM head on a tied
 * embedding) get quantized weights: com.microsoft `MatMulNBits` with symmetric block-wise weights, 4-bit
 * (`q4`) or 8-bit (`int8`), block 32 and accuracy_level 4 by default.
 * Inputs, outputs (`hidden_states` included) and every other node stay as they are, so the edge, the
 * shim and router training load the result like any pack. The embedding table a Gather reads stays
 * float32 (only one row of it is read per token), unless `embedding` (q4) points the lookup of a tied
 * embedding at the LM head's 4-bit blocks (quantize-embedding.ts).
 *
 * Why MatMulNBits for int8 too (`bench int8-kernels`, docs/model-packs.md): with accuracy_level 4 its
 * bits=8 kernel is at least as fast as DynamicQuantizeLinear + MatMulInteger (the earlier int8 form, still
 * written by the `integer` scheme for that bench), and it quantizes activations per row and block, so
 * the rows of a batch do not change each other's rounding and int8 packs batch (shared/model/scheduler/decode-scheduler.ts).
 * accuracy_level 4 runs several times faster than MatMulNBits' fp32 default.
 *
 * @example
 * const r = await quantizePack({ input: 'models/qwen', output: 'models/qwen-q4', dtype: 'q4', blockSize: 32 });
 * console.log(r.quantized, r.weightBytes);
 */
import { copyFileSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import {
  AttributeProtoSchema,
  AttributeProto_AttributeType,
  NodeProtoSchema,
  TensorProtoSchema,
  type ModelProto,
  type NodeProto,
  type TensorProto,
} from 'onnx-buf';
import { AppError } from '../../shared/errors.ts';
import { writeFolderAtomically } from './atomic-output.ts';
import { intAttribute } from './graph-index.ts';
import { initializerFloats, loadExternalData } from './initializer-data.ts';
import { readModel, writeModel } from './onnx-file.ts';
import { allNodes, DataType } from '../../shared/model/onnx-graph.ts';
import { PACK_SOURCE_FILE } from './pack-writer.ts';
import { isValidBlockSize, quantizeBlocks, type WeightBits } from './quantize-blocks.ts';
import { quantizeColumns, WEIGHT_ZERO_POINT } from './quantize-integer.ts';
import { quantizeTiedEmbedding } from './quantize-embedding.ts';

export type QuantizedDtype = 'q4' | 'int8';
export const QUANTIZED_DTYPES: readonly QuantizedDtype[] = ['q4', 'int8'];
const MS_DOMAIN = 'com.microsoft';
/** Above this many bytes of weights the output keeps them in `model.onnx_data`. */
const EXTERNAL_DATA_ABOVE_BYTES = 256 * 1024 * 1024;

export interface QuantizeOptions {
  /** A pack folder (with model.onnx) or a model file. */
  input: string;
  /** The output pack folder. */
  output: string;
  dtype: QuantizedDtype;
  /** Weights per block (and per activation block at accuracy_level 4). Default 32. */
  blockSize?: number;
  /** MatMulNBits' accuracy_level; default 4 (int8 compute, see `bench int8-kernels`), 0 writes none. */
  accuracyLevel?: number;
  /** q4 only: the tied embedding's lookup reads the LM head's 4-bit blocks (quantize-embedding.ts) instead of a float32 table. */
  embedding?: boolean;
  /** Replace a pack this project's tools wrote at `output` (output-ownership.ts). */
  force?: boolean;
}

export interface QuantizeResult {
  /** Nodes rewritten to MatMulNBits. */
  quantized: number;
  /** Bytes of all initializers in the output model. */
  weightBytes: number;
}

export async function quantizePack(options: QuantizeOptions): Promise<QuantizeResult> {
  const blockSize = options.blockSize ?? 32;
  if (!isValidBlockSize(blockSize)) throw new AppError('INVALID_ARGUMENT', `--block-size must be a power of two ≥ 16, got ${blockSize}`);
  if (!QUANTIZED_DTYPES.includes(options.dtype)) throw new AppError('INVALID_ARGUMENT', `--dtype must be q4 or int8, got ${options.dtype}`);
  const isFolder = existsSync(options.input) && statSync(options.input).isDirectory();
  const modelPath = isFolder ? join(options.input, 'model.onnx') : options.input;
  const model = readModel(modelPath);
  const accuracyLevel = options.accuracyLevel ?? 4;
  if (![0, 1, 2, 3, 4].includes(accuracyLevel)) throw new AppError('INVALID_ARGUMENT', `--accuracy-level must be 0 to 4, got ${accuracyLevel}`);
  const scheme: QuantizationScheme = { kind: 'nbits', bits: options.dtype === 'int8' ? 8 : 4, blockSize, ...(accuracyLevel ? { accuracyLevel } : {}) };
  if (options.embedding && options.dtype !== 'q4') throw new AppError('INVALID_ARGUMENT', '--embedding applies to q4 only');
  const quantized = quantizeModel(model, modelPath, scheme, options.embedding === true);
  if (quantized === 0) throw new AppError('FAILED_PRECONDITION', `${modelPath}: no MatMul or Gemm with a constant float32 weight to quantize`);
  // Weights kept as they were (a tied embedding, norms) must not point into the input's data file.
  for (const t of model.graph!.initializer) loadExternalData(t, modelPath);
  const weightBytes = model.graph!.initializer.reduce((a, t) => a + t.rawData.byteLength, 0);
  await writeFolderAtomically(options.output, { tool: 'models quantize', force: options.force }, (dir) => {
    writeModel(model, join(dir, 'model.onnx'), { externalData: weightBytes > EXTERNAL_DATA_ABOVE_BYTES });
    if (isFolder) copyPackFiles(options.input, dir, { dtype: options.dtype, blockSize, accuracyLevel, ...(options.embedding ? { embedding: 'q4' } : {}) });
  });
  return { quantized, weightBytes };
}

/**
 * How weights are quantized: `nbits` writes MatMulNBits (`accuracyLevel` is its `accuracy_level`, the
 * minimum precision of its computation: 4 lets onnxruntime quantize the activations to int8 per block
 * and use integer dot products; absent, the attribute is not written, as onnxruntime's quantizer does,
 * and it computes in fp32); `integer` writes DynamicQuantizeLinear + MatMulInteger with per-column 8-bit weights,
 * the int8 form before MatMulNBits, kept for `bench int8-kernels` to compare against.
 */
export type QuantizationScheme = { kind: 'nbits'; bits: WeightBits; blockSize: number; accuracyLevel?: number } | { kind: 'integer' };

/** Rewrites `model` in place; returns how many MatMul/Gemm nodes were quantized. `embedding`: see QuantizeOptions. */
export function quantizeModel(model: ModelProto, modelPath: string, scheme: QuantizationScheme, embedding = false): number {
  const graph = model.graph!;
  const initializers = new Map(graph.initializer.map((t) => [t.name, t]));
  const made = new Map<string, QuantizedWeight>();
  let count = 0;
  graph.node = graph.node.flatMap((node) => {
    const target = weightOf(node, initializers);
    if (!target) return [node];
    const key = `${target.weight.name}/${target.layout}`;
    let q = made.get(key);
    if (!q) {
      q = quantizeWeight(target, modelPath, scheme, initializers);
      made.set(key, q);
      for (const t of q.tensors) initializers.set(t.name, t);
    }
    count++;
    return scheme.kind === 'nbits' ? [nbitsNode(node, q, scheme)] : integerNodes(node, q, initializers);
  });
  if (embedding && scheme.kind === 'nbits') {
    const tied = new Map([...made].filter(([key]) => key.endsWith('/n-major')).map(([key, q]) => [key.slice(0, -'/n-major'.length), q]));
    quantizeTiedEmbedding(graph, tied, initializers, scheme.blockSize);
  }
  // Weights no node reads any more go (a subgraph's nodes read the main graph's too); a tied embedding still read by its Gather stays.
  const used = new Set([...allNodes(graph)].flatMap((n) => n.input));
  for (const o of graph.output) used.add(o.name);
  graph.initializer = [...initializers.values()].filter((t) => used.has(t.name));
  graph.input = graph.input.filter((i) => !initializers.has(i.name) || used.has(i.name));
  if (scheme.kind === 'nbits' && !model.opsetImport.some((o) => o.domain === MS_DOMAIN))
    model.opsetImport.push({ $typeName: 'onnx.OperatorSetIdProto', domain: MS_DOMAIN, version: 1n });
  return count;
}

interface QuantizedWeight {
  k: number;
  n: number;
  /** nbits: [packed, scales]; integer: [uint8 weight, per-column scales, zero point]. */
  tensors: TensorProto[];
}

function quantizeWeight(target: Target, modelPath: string, scheme: QuantizationScheme, taken: Map<string, unknown>): QuantizedWeight {
  const dims = target.weight.dims.map(Number) as [number, number];
  const [k, n] = target.layout === 'k-major' ? dims : [dims[1], dims[0]];
  const values = initializerFloats(target.weight, modelPath);
  const base = target.weight.name;
  if (scheme.kind === 'integer') {
    const q = quantizeColumns(values, k, n, target.layout);
    return {
      k,
      n,
      tensors: [
        create(TensorProtoSchema, { name: uniqueName(`${base}_quantized`, taken), dataType: DataType.UINT8, dims: [BigInt(k), BigInt(n)], rawData: q.data }),
        create(TensorProtoSchema, {
          name: uniqueName(`${base}_scale`, taken),
          dataType: DataType.FLOAT,
          dims: [BigInt(n)],
          rawData: new Uint8Array(q.scales.buffer),
        }),
        create(TensorProtoSchema, {
          name: uniqueName(`${base}_zero_point`, taken),
          dataType: DataType.UINT8,
          dims: [],
          rawData: Uint8Array.of(WEIGHT_ZERO_POINT),
        }),
      ],
    };
  }
  const { bits, blockSize } = scheme;
  const blocks = quantizeBlocks(values, { k, n, bits, blockSize, layout: target.layout });
  return {
    k,
    n,
    tensors: [
      create(TensorProtoSchema, {
        name: uniqueName(`${base}_Q${bits}`, taken),
        dataType: DataType.UINT8,
        dims: [BigInt(n), BigInt(blocks.blocksPerColumn), BigInt((blockSize * bits) / 8)],
        rawData: blocks.packed,
      }),
      create(TensorProtoSchema, {
        name: uniqueName(`${base}_scales`, taken),
        dataType: DataType.FLOAT,
        dims: [BigInt(n), BigInt(blocks.blocksPerColumn)],
        rawData: new Uint8Array(blocks.scales.buffer),
      }),
    ],
  };
}

function nbitsNode(node: NodeProto, q: QuantizedWeight, scheme: Extract<QuantizationScheme, { kind: 'nbits' }>): NodeProto {
  const { bits, blockSize, accuracyLevel } = scheme;
  return create(NodeProtoSchema, {
    opType: 'MatMulNBits',
    domain: MS_DOMAIN,
    name: `${node.name || node.output[0]}_Q${bits}`,
    input: [node.input[0]!, q.tensors[0]!.name, q.tensors[1]!.name],
    output: [node.output[0]!],
    attribute: [
      intAttr('K', q.k),
      intAttr('N', q.n),
      intAttr('bits', bits),
      intAttr('block_size', blockSize),
      ...(accuracyLevel === undefined ? [] : [intAttr('accuracy_level', accuracyLevel)]),
    ],
  });
}

/** y = Cast(MatMulInteger(DQL(x).q, W, DQL(x).zero)) * (DQL(x).scale * column scales). */
function integerNodes(node: NodeProto, q: QuantizedWeight, taken: Map<string, unknown>): NodeProto[] {
  const prefix = uniqueName(node.name || node.output[0]!, taken);
  const v = (what: string) => `${prefix}/${what}`;
  for (const what of ['x_q', 'x_scale', 'x_zero', 'acc', 'acc_f', 'scale']) taken.set(v(what), true);
  const make = (opType: string, input: string[], output: string[], attribute: ReturnType<typeof intAttr>[] = []) =>
    create(NodeProtoSchema, {
      opType,
      name: `${prefix}/${output[0] === node.output[0] ? 'scaled' : output[0]!.slice(prefix.length + 1)}`,
      input,
      output,
      attribute,
    });
  return [
    make('DynamicQuantizeLinear', [node.input[0]!], [v('x_q'), v('x_scale'), v('x_zero')]),
    make('MatMulInteger', [v('x_q'), q.tensors[0]!.name, v('x_zero'), q.tensors[2]!.name], [v('acc')]),
    make('Cast', [v('acc')], [v('acc_f')], [intAttr('to', DataType.FLOAT)]),
    make('Mul', [v('x_scale'), q.tensors[1]!.name], [v('scale')]),
    make('Mul', [v('acc_f'), v('scale')], [node.output[0]!]),
  ];
}

interface Target {
  weight: TensorProto;
  layout: 'k-major' | 'n-major';
}

/** The constant 2-D float32 weight of a MatMul (`[K, N]`) or of a plain Gemm with transB=1 (`[N, K]`). */
function weightOf(node: NodeProto, initializers: Map<string, TensorProto>): Target | undefined {
  const weight = initializers.get(node.input[1] ?? '');
  if (!weight || weight.dataType !== DataType.FLOAT || weight.dims.length !== 2 || initializers.has(node.input[0] ?? '')) return undefined;
  if (node.domain !== '' && node.domain !== 'ai.onnx') return undefined;
  if (node.opType === 'MatMul') return { weight, layout: 'k-major' };
  const plainGemm =
    node.opType === 'Gemm' &&
    node.input.length === 2 &&
    intAttribute(node, 'transB') === 1 &&
    !intAttribute(node, 'transA') &&
    (node.attribute.find((a) => a.name === 'alpha')?.f ?? 1) === 1;
  return plainGemm ? { weight, layout: 'n-major' } : undefined;
}

function intAttr(name: string, value: number) {
  return create(AttributeProtoSchema, { name, type: AttributeProto_AttributeType.INT, i: BigInt(value) });
}

function uniqueName(base: string, taken: Map<string, unknown>): string {
  let name = base;
  for (let i = 1; taken.has(name); i++) name = `${base}_${i}`;
  return name;
}

/** Copies the pack's other files (config, tokenizer, ...) and records where the weights came from. */
function copyPackFiles(from: string, to: string, quantization: Record<string, unknown>): void {
  for (const f of readdirSync(from)) {
    if (f === 'model.onnx' || f.startsWith('model.onnx_data') || f === PACK_SOURCE_FILE || !statSync(join(from, f)).isFile()) continue;
    copyFileSync(join(from, f), join(to, f));
  }
  const sourceFile = join(from, PACK_SOURCE_FILE);
  const source = existsSync(sourceFile) ? JSON.parse(readFileSync(sourceFile, 'utf8')) : { folder: from };
  writeFileSync(join(to, PACK_SOURCE_FILE), `${JSON.stringify({ tool: 'quantize', ...quantization, from: source }, null, 2)}\n`);
}
