/**
 * A small builder for ONNX graphs on top of the maintained protobuf definitions in `onnx-buf`.
 * It only names values and collects nodes; serialization is @bufbuild/protobuf's.
 *
 * @example
 * const g = new GraphBuilder('add-one');
 * const x = g.input('x', DataType.FLOAT, ['n']);
 * g.output(g.op('Add', [x, g.floats('one', [1], [1])]), 'y', DataType.FLOAT, ['n']);
 * const model = g.toModel();
 */
import { create } from '@bufbuild/protobuf';
import {
  AttributeProtoSchema,
  AttributeProto_AttributeType as AttributeType,
  GraphProtoSchema,
  ModelProtoSchema,
  NodeProtoSchema,
  TensorProtoSchema,
  TensorProto_DataType as DataType,
  TypeProtoSchema,
  ValueInfoProtoSchema,
  type AttributeProto,
  type GraphProto,
  type ModelProto,
  type NodeProto,
  type TensorProto,
  type ValueInfoProto,
} from 'onnx-buf';

export { DataType };

/** Opset of the default domain the builder's graphs are written for. */
export const OPSET = 17n;

/** onnxruntime's own operators (GroupQueryAttention, SkipSimplifiedLayerNormalization, MatMulNBits, ...). */
export const CONTRIB_DOMAIN = 'com.microsoft';

export type Dim = number | string;
export type AttributeValue = number | bigint | string | number[] | bigint[] | Float32Array | TensorProto | GraphProto;

/** Float attributes must be marked, since a JS number cannot say whether it is an int or a float. */
export class FloatAttr {
  constructor(readonly value: number) {}
}

/** A typed value; `dims` omitted leaves its shape unstated (an If branch's outputs, whose shapes vary). */
export function valueInfo(name: string, elemType: DataType, dims?: readonly Dim[]): ValueInfoProto {
  const shape = dims && {
    dim: dims.map((d) => ({
      value: typeof d === 'number' ? { case: 'dimValue' as const, value: BigInt(d) } : { case: 'dimParam' as const, value: d },
    })),
  };
  return create(ValueInfoProtoSchema, {
    name,
    type: create(TypeProtoSchema, { value: { case: 'tensorType', value: { elemType, ...(shape ? { shape } : {}) } } }),
  });
}

/** Every node of `graph`, those of its subgraphs (an If's branches) included. */
export function* allNodes(graph: GraphProto): Generator<NodeProto> {
  for (const node of graph.node) {
    yield node;
    for (const a of node.attribute) {
      if (a.g) yield* allNodes(a.g);
      for (const sub of a.graphs) yield* allNodes(sub);
    }
  }
}

function attribute(name: string, value: AttributeValue | FloatAttr): AttributeProto {
  if (value instanceof FloatAttr) return create(AttributeProtoSchema, { name, type: AttributeType.FLOAT, f: value.value });
  if (typeof value === 'number' || typeof value === 'bigint') {
    return create(AttributeProtoSchema, { name, type: AttributeType.INT, i: BigInt(value) });
  }
  if (typeof value === 'string') {
    return create(AttributeProtoSchema, { name, type: AttributeType.STRING, s: new TextEncoder().encode(value) });
  }
  if (value instanceof Float32Array) return create(AttributeProtoSchema, { name, type: AttributeType.FLOATS, floats: [...value] });
  if (Array.isArray(value)) {
    return create(AttributeProtoSchema, { name, type: AttributeType.INTS, ints: (value as (number | bigint)[]).map(BigInt) });
  }
  if (value.$typeName === 'onnx.GraphProto') return create(AttributeProtoSchema, { name, type: AttributeType.GRAPH, g: value });
  return create(AttributeProtoSchema, { name, type: AttributeType.TENSOR, t: value });
}

function bytesOf(data: Float32Array | BigInt64Array | Int32Array | Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
}

export function tensor(name: string, data: Float32Array | BigInt64Array, dims: readonly number[]): TensorProto {
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) throw new Error(`tensor ${name}: ${data.length} values for shape [${dims}]`);
  return create(TensorProtoSchema, {
    name,
    dims: dims.map(BigInt),
    dataType: data instanceof Float32Array ? DataType.FLOAT : DataType.INT64,
    rawData: bytesOf(data),
  });
}

/** Collects inputs, outputs, initializers and nodes; names intermediate values uniquely. */
export class GraphBuilder {
  private readonly nodes: NodeProto[] = [];
  private readonly inputs: ValueInfoProto[] = [];
  private readonly outputs: ValueInfoProto[] = [];
  /** Shared with subgraphs (subgraph()): one namespace, one counter, the initializers all in the main graph. */
  private readonly model: {
    initializers: TensorProto[];
    usedNames: Set<string>;
    counter: number;
    /** Whether a node of onnxruntime's contrib domain was added: the model then imports that opset too. */
    usesContribOps: boolean;
  };

  constructor(
    private readonly name: string,
    parent?: GraphBuilder,
  ) {
    this.model = parent?.model ?? { initializers: [], usedNames: new Set(), counter: 0, usesContribOps: false };
  }

  input(name: string, elemType: DataType, dims: readonly Dim[]): string {
    this.claim(name);
    this.inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /** Declares `value` as a graph output called `name` (through an Identity when the names differ); `dims` omitted: shape unstated. */
  output(value: string, name: string, elemType: DataType, dims?: readonly Dim[]): string {
    if (value !== name) this.op('Identity', [value], {}, [name]);
    this.outputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  floats(name: string, data: Float32Array | number[], dims: readonly number[]): string {
    this.claim(name);
    this.model.initializers.push(tensor(name, data instanceof Float32Array ? data : Float32Array.from(data), dims));
    return name;
  }

  ints(name: string, data: readonly number[], dims: readonly number[] = [data.length]): string {
    this.claim(name);
    this.model.initializers.push(tensor(name, BigInt64Array.from(data.map(BigInt)), dims));
    return name;
  }

  /** Adds a node; returns its output names (generated unless given). */
  ops(
    opType: string,
    inputs: readonly string[],
    attributes: Record<string, AttributeValue | FloatAttr> = {},
    outputs: number | readonly string[] = 1,
    domain = '',
  ): string[] {
    const id = this.model.counter++;
    if (domain === CONTRIB_DOMAIN) this.model.usesContribOps = true;
    const outNames = typeof outputs === 'number' ? Array.from({ length: outputs }, (_, i) => `/${opType}_${id}/out${i}`) : [...outputs];
    // An empty name leaves an optional output out, as ONNX allows.
    for (const n of outNames) if (n !== '') this.claim(n);
    this.nodes.push(
      create(NodeProtoSchema, {
        opType,
        domain,
        name: `/${opType}_${id}`,
        input: [...inputs],
        output: outNames,
        attribute: Object.entries(attributes).map(([k, v]) => attribute(k, v)),
      }),
    );
    return outNames;
  }

  op(opType: string, inputs: readonly string[], attributes: Record<string, AttributeValue | FloatAttr> = {}, outputs?: readonly string[]): string {
    return this.ops(opType, inputs, attributes, outputs ?? 1)[0]!;
  }

  /** Adds a node of onnxruntime's contrib domain (`com.microsoft`); returns its output names. */
  contribOps(opType: string, inputs: readonly string[], attributes: Record<string, AttributeValue | FloatAttr>, outputs: number | readonly string[]): string[] {
    return this.ops(opType, inputs, attributes, outputs, CONTRIB_DOMAIN);
  }

  /**
   * A graph for a control-flow attribute (an If's `then_branch` / `else_branch`): `build` adds nodes to a
   * builder that reads this graph's values from the outer scope and shares its names and initializers
   * (they stay in the main graph, where the quantizer and the weight files find them), and declares the
   * branch's outputs with `output`.
   */
  subgraph(name: string, build: (branch: GraphBuilder) => void): GraphProto {
    const branch = new GraphBuilder(name, this);
    build(branch);
    return create(GraphProtoSchema, { name, node: branch.nodes, output: branch.outputs });
  }

  toModel(metadata: Record<string, string> = {}): ModelProto {
    return create(ModelProtoSchema, {
      irVersion: 8n,
      producerName: 'edge-token-router',
      opsetImport: [{ domain: '', version: OPSET }, ...(this.model.usesContribOps ? [{ domain: CONTRIB_DOMAIN, version: 1n }] : [])],
      metadataProps: Object.entries(metadata).map(([key, value]) => ({ key, value })),
      graph: create(GraphProtoSchema, {
        name: this.name,
        node: this.nodes,
        input: this.inputs,
        output: this.outputs,
        initializer: this.model.initializers,
      }),
    });
  }

  private claim(name: string): void {
    if (this.model.usedNames.has(name)) throw new Error(`graph ${this.name}: value name ${name} used twice`);
    this.model.usedNames.add(name);
  }
}
