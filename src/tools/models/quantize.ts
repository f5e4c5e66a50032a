/**
 * `models quantize`: a pack whose constant-weight MatMuls (and the Gemm(transB=1) LM head on a tied
 * embedding) become com.microsoft `MatMulNBits` with symmetric block-wise 4- or 8-bit weights.
 * Inputs, outputs (`hidden_states` included) and every other node stay as they are, so the edge, the
 * shim and router training load the result like any pack. The embedding table a Gather reads stays
 * float32 (only one row of it is read per token).
 *
 * `int8` is `MatMulNBits` with bits=8 rather than DynamicQuantizeLinear + MatMulInteger: onnxruntime's
 * CPU kernels run it faster here (README, "Measured figures").
 *
 * @example
 * const r = await quantizePack({ input: 'models/qwen', output: 'models/qwen-q4', dtype: 'q4', blockSize: 32 });
 * console.log(r.quantized, r.weightBytes);
 */
import { copyFileSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { AttributeProtoSchema, AttributeProto_AttributeType, NodeProtoSchema, TensorProtoSchema, type ModelProto, type NodeProto, type TensorProto } from 'onnx-buf';
import { AppError } from '../../shared/errors.ts';
import { writeFolderAtomically } from './atomic-output.ts';
import { intAttribute } from './graph-index.ts';
import { initializerFloats } from './initializer-data.ts';
import { readModel, writeModel } from './onnx-file.ts';
import { DataType } from './onnx-graph.ts';
import { PACK_SOURCE_FILE } from './pack-writer.ts';
import { isValidBlockSize, quantizeBlocks, type WeightBits } from './quantize-blocks.ts';

export type QuantizedDtype = 'q4' | 'int8';
export const QUANTIZED_DTYPES: readonly QuantizedDtype[] = ['q4', 'int8'];
const BITS: Record<QuantizedDtype, WeightBits> = { q4: 4, int8: 8 };
const MS_DOMAIN = 'com.microsoft';
/** Above this many bytes of weights the output keeps them in `model.onnx_data`. */
const EXTERNAL_DATA_ABOVE_BYTES = 256 * 1024 * 1024;

export interface QuantizeOptions {
  /** A pack folder (with model.onnx) or a model file. */
  input: string;
  /** The output pack folder. */
  output: string;
  dtype: QuantizedDtype;
  blockSize?: number;
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
  const quantized = quantizeModel(model, modelPath, BITS[options.dtype], blockSize);
  if (quantized === 0) throw new AppError('FAILED_PRECONDITION', `${modelPath}: no MatMul or Gemm with a constant float32 weight to quantize`);
  const weightBytes = model.graph!.initializer.reduce((a, t) => a + t.rawData.byteLength, 0);
  await writeFolderAtomically(options.output, (dir) => {
    writeModel(model, join(dir, 'model.onnx'), { externalData: weightBytes > EXTERNAL_DATA_ABOVE_BYTES });
    if (isFolder) copyPackFiles(options.input, dir, { dtype: options.dtype, blockSize });
  });
  return { quantized, weightBytes };
}

/** Rewrites `model` in place; returns how many nodes became MatMulNBits. */
export function quantizeModel(model: ModelProto, modelPath: string, bits: WeightBits, blockSize: number): number {
  const graph = model.graph!;
  const initializers = new Map(graph.initializer.map((t) => [t.name, t]));
  const made = new Map<string, { packed: TensorProto; scales: TensorProto; k: number; n: number }>();
  let count = 0;
  graph.node = graph.node.map((node) => {
    const target = weightOf(node, initializers);
    if (!target) return node;
    let q = made.get(`${target.weight.name}/${target.layout}`);
    if (!q) {
      const dims = target.weight.dims.map(Number) as [number, number];
      const [k, n] = target.layout === 'k-major' ? dims : [dims[1], dims[0]];
      const blocks = quantizeBlocks(initializerFloats(target.weight, modelPath), { k, n, bits, blockSize, layout: target.layout });
      const name = uniqueName(`${target.weight.name}_Q${bits}`, initializers);
      const packed = create(TensorProtoSchema, { name, dataType: DataType.UINT8, dims: [BigInt(n), BigInt(blocks.blocksPerColumn), BigInt((blockSize * bits) / 8)], rawData: blocks.packed });
      const scalesName = uniqueName(`${target.weight.name}_scales`, initializers);
      const scales = create(TensorProtoSchema, { name: scalesName, dataType: DataType.FLOAT, dims: [BigInt(n), BigInt(blocks.blocksPerColumn)], rawData: new Uint8Array(blocks.scales.buffer) });
      q = { packed, scales, k, n };
      made.set(`${target.weight.name}/${target.layout}`, q);
      initializers.set(packed.name, packed);
      initializers.set(scales.name, scales);
    }
    count++;
    return create(NodeProtoSchema, {
      opType: 'MatMulNBits',
      domain: MS_DOMAIN,
      name: `${node.name || node.output[0]}_Q${bits}`,
      input: [node.input[0]!, q.packed.name, q.scales.name],
      output: [node.output[0]!],
      attribute: [intAttr('K', q.k), intAttr('N', q.n), intAttr('bits', bits), intAttr('block_size', blockSize)],
    });
  });
  // Weights no node reads any more go; a tied embedding still read by its Gather stays.
  const used = new Set(graph.node.flatMap((n) => n.input));
  for (const o of graph.output) used.add(o.name);
  graph.initializer = [...initializers.values()].filter((t) => used.has(t.name));
  graph.input = graph.input.filter((i) => !initializers.has(i.name) || used.has(i.name));
  if (!model.opsetImport.some((o) => o.domain === MS_DOMAIN)) model.opsetImport.push({ $typeName: 'onnx.OperatorSetIdProto', domain: MS_DOMAIN, version: 1n });
  return count;
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
