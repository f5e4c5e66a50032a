/**
 * The values of an export's constant tensors as float32, wherever the exporter put them: an initializer
 * (in the file or in external data), a `Constant` node's value, or either seen through `Identity` or a 2-D
 * `Transpose` (how some exporters write a tied LM head). float16 weights are widened to float32 exactly;
 * quantized element types are refused with the way to get a float export rewritten instead.
 *
 * @example
 * const constants = new ExportConstants(model.graph!, 'hub/model.onnx');
 * const w = constants.floats('onnx::MatMul_950'); // { values, dims: [64, 64], type: 'float32' }
 */
import type { GraphProto, NodeProto, TensorProto } from 'onnx-buf';
import { AppError } from '../../shared/errors.ts';
import { halfBitsToFloat32 } from '../../shared/model/float-tensors.ts';
import { DataType } from '../../shared/model/onnx-graph.ts';
import { elemTypeName, intsAttribute } from './graph-index.ts';
import { initializerFloats, loadExternalData } from './initializer-data.ts';

export type WeightType = 'float32' | 'float16';

export interface ConstantFloats {
  values: Float32Array;
  dims: number[];
  /** The element type the file stores. */
  type: WeightType;
}

/** What to do with a quantized export, in every refusal that finds one. */
export const QUANTIZED_ADVICE = 'optimize the fp32 export, then `models quantize`';

const QUANTIZED_TYPES = new Set([DataType.INT8, DataType.UINT8, DataType.INT4, DataType.UINT4, DataType.INT16, DataType.UINT16]);

export class ExportConstants {
  private readonly initializers = new Map<string, TensorProto>();
  private readonly producers = new Map<string, NodeProto>();

  constructor(
    graph: GraphProto,
    private readonly modelPath: string,
  ) {
    for (const t of graph.initializer) this.initializers.set(t.name, t);
    for (const node of graph.node) for (const out of node.output) if (out) this.producers.set(out, node);
  }

  /** True for a float32 or float16 constant (what `floats` reads without refusing). */
  isFloat(name: string): boolean {
    const t = this.tensorOf(name) ?? this.tensorOf(this.transposeSource(name) ?? '');
    return t?.dataType === DataType.FLOAT || t?.dataType === DataType.FLOAT16;
  }

  /** The dims of a constant without reading its values; undefined for computed tensors. */
  dims(name: string): number[] | undefined {
    const t = this.tensorOf(name);
    if (t) return t.dims.map(Number);
    const source = this.transposeSource(name);
    return source ? this.dims(source)?.reverse() : undefined;
  }

  /** The constant's values as float32; undefined when `name` is computed at run time. */
  floats(name: string): ConstantFloats | undefined {
    const t = this.tensorOf(name);
    if (t) return { values: this.widen(t), dims: t.dims.map(Number), type: t.dataType === DataType.FLOAT16 ? 'float16' : 'float32' };
    const source = this.transposeSource(name);
    const inner = source ? this.floats(source) : undefined;
    if (!inner || inner.dims.length !== 2) return undefined;
    const [rows, cols] = inner.dims as [number, number];
    const values = new Float32Array(inner.values.length);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) values[c * rows + r] = inner.values[r * cols + c]!;
    return { values, dims: [cols, rows], type: inner.type };
  }

  private tensorOf(name: string): TensorProto | undefined {
    const init = this.initializers.get(name);
    if (init) return init;
    const node = this.producers.get(name);
    if (node?.opType === 'Constant') return node.attribute.find((a) => a.name === 'value')?.t;
    if (node?.opType === 'Identity' && node.input[0]) return this.tensorOf(node.input[0]);
    return undefined;
  }

  /** The input of a 2-D Transpose that produces `name`, when that input is itself a constant. */
  private transposeSource(name: string): string | undefined {
    const node = this.producers.get(name);
    if (node?.opType !== 'Transpose' || !node.input[0]) return undefined;
    const perm = intsAttribute(node, 'perm');
    if (perm && (perm.length !== 2 || perm[0] !== 1)) return undefined;
    return this.tensorOf(node.input[0]) || this.transposeSource(node.input[0]) ? node.input[0] : undefined;
  }

  private widen(t: TensorProto): Float32Array {
    if (t.dataType === DataType.FLOAT) return initializerFloats(t, this.modelPath);
    if (t.dataType === DataType.FLOAT16) return halfFloats(t, this.modelPath);
    const type = elemTypeName(t.dataType);
    if (QUANTIZED_TYPES.has(t.dataType))
      throw new AppError('INVALID_ARGUMENT', `${this.modelPath}: ${t.name} is ${type} (a quantized export); ${QUANTIZED_ADVICE}`);
    throw new AppError('INVALID_ARGUMENT', `${this.modelPath}: ${t.name} is ${type}; float32 and float16 weights are read`);
  }
}

function halfFloats(t: TensorProto, modelPath: string): Float32Array {
  loadExternalData(t, modelPath);
  const count = t.dims.reduce((a, d) => a * Number(d), 1);
  // float16 values sit in raw_data, or one per int32_data entry when the writer did not use raw bytes.
  const bits = t.rawData.byteLength ? new Uint16Array(new Uint8Array(t.rawData).buffer) : Uint16Array.from(t.int32Data);
  if (bits.length !== count) throw new AppError('INVALID_ARGUMENT', `${modelPath}: ${t.name} holds ${bits.length} float16 values for ${count}`);
  return halfBitsToFloat32(bits);
}
