/**
 * Read-only look-ups over an ONNX graph that the model tools need but protobuf does not give: which
 * node produces a tensor, which tensors are constant (weights and what is computed from weights only),
 * and the declared or derivable type and shape of a tensor. Only the top-level graph is indexed;
 * values inside If/Loop bodies are not visible from outside anyway.
 */
import type { GraphProto, NodeProto, TensorProto, TypeProto, ValueInfoProto } from 'onnx-buf';
import { DataType, type Dim } from '../../shared/model/onnx-graph.ts';

export interface TensorType {
  elemType: DataType;
  /** Absent when the graph declares no shape (rank unknown). */
  dims?: Dim[];
}

/** Ops that only move, retype or re-view their first input; a weight passed through them stays a weight. */
const SHAPE_KEEPING = new Set(['Identity', 'Cast', 'DequantizeLinear']);

export class GraphIndex {
  private readonly producers = new Map<string, NodeProto>();
  private readonly initializers = new Map<string, TensorProto>();
  private readonly declared = new Map<string, ValueInfoProto>();
  private readonly graphInputs = new Set<string>();
  private readonly constants = new Set<string>();

  constructor(readonly graph: GraphProto) {
    for (const t of graph.initializer) this.initializers.set(t.name, t);
    // Outputs and inputs last, so that the interface declarations win over value_info.
    for (const v of [...graph.valueInfo, ...graph.output, ...graph.input]) this.declared.set(v.name, v);
    for (const v of graph.input) if (!this.initializers.has(v.name)) this.graphInputs.add(v.name);
    for (const name of this.initializers.keys()) this.constants.add(name);
    // ONNX requires nodes in topological order, so one pass settles constness without recursion
    // (recursion would follow the activation chain through every layer of a large model).
    for (const node of graph.node) {
      for (const out of node.output) if (out) this.producers.set(out, node);
      const inputs = node.input.filter((i) => i !== '');
      const constant = node.opType === 'Constant' || (inputs.length > 0 && inputs.every((i) => this.constants.has(i)));
      if (constant) for (const out of node.output) if (out) this.constants.add(out);
    }
  }

  producer(tensor: string): NodeProto | undefined {
    return this.producers.get(tensor);
  }

  initializer(tensor: string): TensorProto | undefined {
    return this.initializers.get(tensor);
  }

  /** True for initializers, Constant outputs and anything computed from those alone. */
  isConstant(tensor: string): boolean {
    return this.constants.has(tensor);
  }

  /** A tensor that a graph output could refer to: a node output or a (non-initializer) graph input. */
  isRuntimeValue(tensor: string): boolean {
    return this.producers.has(tensor) || this.graphInputs.has(tensor);
  }

  /** Any name the graph already uses for a value. */
  hasName(tensor: string): boolean {
    return this.isRuntimeValue(tensor) || this.initializers.has(tensor) || this.declared.has(tensor);
  }

  /** Type and shape as declared in value_info, the graph inputs or the graph outputs. */
  declaredType(tensor: string): TensorType | undefined {
    const info = this.declared.get(tensor);
    return info?.type ? tensorTypeOf(info.type) : undefined;
  }

  /**
   * The static shape of a constant tensor (a weight), following Identity/Cast/DequantizeLinear and
   * Transpose, which is how exports store a tied LM head (`Transpose(embed_tokens)`).
   */
  constantShape(tensor: string, depth = 0): number[] | undefined {
    const init = this.initializers.get(tensor);
    if (init) return init.dims.map(Number);
    const declared = this.declaredType(tensor)?.dims;
    if (declared?.every((d) => typeof d === 'number')) return declared as number[];
    const node = this.producers.get(tensor);
    if (!node || depth > 8) return undefined;
    if (node.opType === 'Constant') {
      const value = node.attribute.find((a) => a.name === 'value')?.t;
      return value?.dims.map(Number);
    }
    const inner = node.input[0] ? this.constantShape(node.input[0], depth + 1) : undefined;
    if (!inner) return undefined;
    if (SHAPE_KEEPING.has(node.opType)) return inner;
    if (node.opType === 'Transpose') {
      const perm = intsAttribute(node, 'perm') ?? inner.map((_, i) => inner.length - 1 - i);
      return perm.map((p) => inner[p]!);
    }
    return undefined;
  }

  /** Element type of a weight, looking through the ops `constantShape` follows (but not past a Cast). */
  constantElemType(tensor: string): DataType | undefined {
    const init = this.initializers.get(tensor);
    if (init) return init.dataType;
    const node = this.producers.get(tensor);
    if (!node) return undefined;
    if (node.opType === 'Cast') return intAttribute(node, 'to') as DataType | undefined;
    if (node.opType === 'Identity' || node.opType === 'Transpose') return node.input[0] ? this.constantElemType(node.input[0]) : undefined;
    return undefined;
  }
}

export function tensorTypeOf(type: TypeProto): TensorType | undefined {
  if (type.value.case !== 'tensorType') return undefined;
  const { elemType, shape } = type.value.value;
  if (!shape) return { elemType };
  return {
    elemType,
    dims: shape.dim.map((d) => {
      if (d.value.case === 'dimValue') return Number(d.value.value);
      if (d.value.case === 'dimParam') return d.value.value;
      return '?';
    }),
  };
}

export function intAttribute(node: NodeProto, name: string): number | undefined {
  const a = node.attribute.find((x) => x.name === name);
  return a ? Number(a.i) : undefined;
}

export function intsAttribute(node: NodeProto, name: string): number[] | undefined {
  const a = node.attribute.find((x) => x.name === name);
  return a ? a.ints.map(Number) : undefined;
}

/** `[batch_size, sequence_length, 64]`, or `[?]` when the rank is unknown. */
export function formatDims(dims: readonly Dim[] | undefined): string {
  return dims ? `[${dims.join(', ')}]` : '[?]';
}

/** `float32`, `float16`, `int64`, ... (ONNX's enum names in the spelling numpy users expect). */
export function elemTypeName(t: DataType): string {
  if (t === DataType.FLOAT) return 'float32';
  if (t === DataType.DOUBLE) return 'float64';
  return (DataType[t] ?? `type${t}`).toLowerCase();
}

/** Bits per element of the ONNX data types that weights come in. */
export function elemBits(t: DataType): number {
  switch (t) {
    case DataType.DOUBLE:
    case DataType.INT64:
    case DataType.UINT64:
    case DataType.COMPLEX64:
      return 64;
    case DataType.COMPLEX128:
      return 128;
    case DataType.FLOAT:
    case DataType.INT32:
    case DataType.UINT32:
      return 32;
    case DataType.FLOAT16:
    case DataType.BFLOAT16:
    case DataType.INT16:
    case DataType.UINT16:
      return 16;
    case DataType.INT4:
    case DataType.UINT4:
      return 4;
    default:
      return 8;
  }
}
