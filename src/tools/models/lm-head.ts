/**
 * Finding the LM head of a decoder export: the MatMul/Gemm whose output becomes `logits`, and the
 * activation it multiplies (the final-norm output, i.e. the hidden state a router is trained on).
 * `expose-hidden` patches the graph with what this finds; `inspect` lists it.
 *
 * Every variant a hub folder holds is read: float MatMul/Gemm (fp32, fp16, tied embeddings through a
 * Transpose), com.microsoft MatMulNBits (q4), and dynamic int8 (`quantize_dynamic`), where the head is
 * MatMulInteger fed by DynamicQuantizeLinear: the hidden state is the quantizer's float input, and the
 * quantizer's scale also reaches `logits` (through the output's rescaling Mul), which is not a second path.
 */
import type { NodeProto } from 'onnx-buf';
import { DataType, type Dim } from '../../shared/model/onnx-graph.ts';
import { formatDims, type GraphIndex, intAttribute, type TensorType } from './graph-index.ts';

export const LOGITS = 'logits';
export const HIDDEN_STATES = 'hidden_states';

const HEAD_OPS = new Set(['MatMul', 'Gemm', 'MatMulNBits', 'MatMulInteger']);
const QUANTIZER = 'DynamicQuantizeLinear';
/** Ops between the head and `logits` whose first input carries the logits through (reshaped, cast, sliced). */
const CARRY_FIRST_INPUT = new Set(['Identity', 'Cast', 'Reshape', 'Squeeze', 'Unsqueeze', 'Flatten', 'Slice', 'Tanh']);
/** Elementwise ops: a constant operand is a bias or scale (e.g. logit soft-capping); the others carry logits. */
const ELEMENTWISE = new Set(['Add', 'Sub', 'Mul', 'Div']);

/** A MatMul/Gemm node seen as a possible LM head. */
export interface HeadCandidate {
  node: NodeProto;
  /** The tensor to expose: the head's activation input, or the 3-D tensor before a flattening Reshape. */
  tensor: string;
  /** The weight (or weight-producing) input, when one input is constant. */
  weight?: string;
  weightShape?: number[];
  /** The head's input size (hidden size) and output size (vocabulary size), when the weight shape tells. */
  inFeatures?: number;
  outFeatures?: number;
  /** Type and shape of `tensor`: declared in the graph, else derived from `logits` and the weight. */
  type: TensorType;
  /** Why this node cannot serve as the head (e.g. both inputs computed); the tensor is then a guess. */
  problem?: string;
}

export function nodeLabel(node: NodeProto): string {
  return node.name ? `${node.name} (${node.opType})` : `${node.opType} → ${node.output[0]}`;
}

export function describeCandidate(c: HeadCandidate): string {
  return `${c.tensor} ${formatDims(c.type.dims)} (input of ${nodeLabel(c.node)})`;
}

/** The vocabulary size, when `logits` is declared with a numeric last dimension. */
export function vocabSize(index: GraphIndex): number | undefined {
  const last = index.declaredType(LOGITS)?.dims?.at(-1);
  return typeof last === 'number' ? last : undefined;
}

/** Reads a head node: which input is the activation, the weight's shape, and the shape to declare. */
export function headCandidate(index: GraphIndex, node: NodeProto): HeadCandidate {
  const [a = '', b = ''] = node.input;
  let tensor = a;
  let weight: string | undefined = b;
  let problem: string | undefined;
  let inFeatures: number | undefined;
  let outFeatures: number | undefined;
  if (node.opType === 'MatMul') {
    // `W @ h` (weight first) is legal too; the hidden state is whichever input is not constant.
    if (index.isConstant(a) && !index.isConstant(b)) [tensor, weight] = [b, a];
    else if (!index.isConstant(b)) [weight, problem] = [undefined, 'both inputs are computed, neither is a weight'];
  }
  if (node.opType === 'MatMulInteger') {
    // The activation arrives quantized; the float tensor before DynamicQuantizeLinear is the hidden state.
    const quantizer = index.producer(a);
    if (quantizer?.opType === QUANTIZER && quantizer.input[0]) tensor = quantizer.input[0];
    else problem = `its activation input is not produced by ${QUANTIZER}`;
    if (!index.isConstant(b)) [weight, problem] = [undefined, 'its second input is computed, not a weight'];
  }
  const weightShape = weight ? index.constantShape(weight) : undefined;

  if (node.opType === 'MatMul' || node.opType === 'MatMulInteger') {
    if (weight === b && weightShape && weightShape.length >= 2) [inFeatures, outFeatures] = weightShape.slice(-2) as [number, number];
  } else if (node.opType === 'Gemm') {
    if (intAttribute(node, 'transA')) problem = 'transA=1 is not the layout of an LM head';
    else if (index.isConstant(a)) problem = 'its activation input A is a constant';
    if (weightShape?.length === 2) {
      [outFeatures, inFeatures] = intAttribute(node, 'transB') ? weightShape : [weightShape[1]!, weightShape[0]!];
    }
  } else {
    // com.microsoft MatMulNBits (int4 exports): the weight is packed, its sizes are attributes.
    inFeatures = intAttribute(node, 'K');
    outFeatures = intAttribute(node, 'N');
  }

  const flattened = unflatten(index, node, tensor);
  if (flattened) tensor = flattened;
  return {
    node,
    tensor,
    ...(weight ? { weight } : {}),
    ...(weightShape ? { weightShape } : {}),
    ...(inFeatures !== undefined ? { inFeatures } : {}),
    ...(outFeatures !== undefined ? { outFeatures } : {}),
    type: index.declaredType(tensor) ?? derivedType(index, node, inFeatures),
    ...(problem ? { problem } : {}),
  };
}

/**
 * Exports that write the head as Gemm (2-D only) flatten `[batch, seq, hidden]` first; the router
 * wants the per-position tensor, so step back over that Reshape/Flatten to its 3-D input.
 */
function unflatten(index: GraphIndex, head: NodeProto, tensor: string): string | undefined {
  const producer = index.producer(tensor);
  if (!producer || !producer.input[0]) return undefined;
  if (producer.opType === 'Flatten') return producer.input[0];
  if (producer.opType !== 'Reshape') return undefined;
  const target = producer.input[1] ? index.constantShape(producer.input[1]) : undefined;
  const toTwoDims = head.opType === 'Gemm' || (target?.length === 1 && target[0] === 2);
  return toTwoDims ? producer.input[0] : undefined;
}

/** `logits`' shape with the vocabulary replaced by the hidden size; the type of the weights. */
function derivedType(index: GraphIndex, head: NodeProto, hidden: number | undefined): TensorType {
  const logits = index.declaredType(LOGITS);
  const leading: Dim[] = logits?.dims && logits.dims.length >= 2 ? logits.dims.slice(0, -1) : ['batch_size', 'sequence_length'];
  // MatMulNBits keeps its weights packed as uint8; its scales have the activation's type.
  // MatMulInteger's weights are integers: the logits' type is then the activation's.
  const typed = head.opType === 'MatMulNBits' ? head.input[2] : head.opType === 'MatMulInteger' ? undefined : head.input[1];
  const weightType = typed ? index.constantElemType(typed) : undefined;
  const floatWeights = weightType !== undefined && FLOAT_TYPES.has(weightType);
  return {
    elemType: floatWeights ? weightType : (logits?.elemType ?? DataType.FLOAT),
    dims: [...leading, hidden ?? 'hidden_size'],
  };
}

const FLOAT_TYPES = new Set<DataType>([DataType.FLOAT, DataType.FLOAT16, DataType.BFLOAT16, DataType.DOUBLE]);

/** What walking back from `logits` found: the head nodes reached, and ops it could not see through. */
export interface HeadTrace {
  heads: HeadCandidate[];
  /** Nodes on the way from `logits` that are neither heads nor known to carry logits through. */
  opaque: NodeProto[];
  /** Graph inputs reached without passing a head. */
  inputs: string[];
}

export function traceHeads(index: GraphIndex): HeadTrace {
  const trace: HeadTrace = { heads: [], opaque: [], inputs: [] };
  const seen = new Set<string>();
  const pending = [LOGITS];
  /** Quantizers reached through their scale or zero point (the int8 head's output rescaling). */
  const quantizerScales: NodeProto[] = [];
  while (pending.length) {
    const tensor = pending.pop()!;
    if (seen.has(tensor) || index.isConstant(tensor)) continue;
    seen.add(tensor);
    const node = index.producer(tensor);
    if (!node) trace.inputs.push(tensor);
    else if (HEAD_OPS.has(node.opType)) trace.heads.push(headCandidate(index, node));
    else if (node.opType === QUANTIZER && tensor !== node.output[0]) quantizerScales.push(node);
    else if (CARRY_FIRST_INPUT.has(node.opType)) pending.push(node.input[0]!);
    else if (ELEMENTWISE.has(node.opType)) pending.push(...node.input.filter((i) => !index.isConstant(i)));
    else trace.opaque.push(node);
  }
  // A quantizer whose scale rescales the head's own output is part of that head; any other is a second path.
  for (const q of quantizerScales) {
    if (!trace.heads.some((h) => h.node.opType === 'MatMulInteger' && h.node.input[0] === q.output[0])) trace.opaque.push(q);
  }
  return trace;
}

export type HeadDecision = { ok: true; head: HeadCandidate } | { ok: false; reason: string; candidates: HeadCandidate[] };

/** The one head that produces `logits`, or why there is not exactly one. */
export function decideHead(index: GraphIndex): HeadDecision {
  // A decoder export declares `logits` as a graph output; an inner tensor of that name does not make one.
  if (!index.graph.output.some((o) => o.name === LOGITS)) {
    const outputs = index.graph.output.map((o) => o.name).join(', ');
    return { ok: false, reason: `no graph output named ${LOGITS} (outputs: ${outputs || 'none'})`, candidates: [] };
  }
  const { heads, opaque, inputs } = traceHeads(index);
  if (heads.length > 1) {
    return { ok: false, reason: `${heads.length} MatMul/Gemm nodes reach ${LOGITS}, cannot tell which is the LM head`, candidates: heads };
  }
  const through = [...opaque.map(nodeLabel), ...inputs.map((i) => `graph input ${i}`)].join(', ');
  const head = heads[0];
  if (!head) return { ok: false, reason: `no MatMul/Gemm produces ${LOGITS}${through ? ` (it comes from ${through})` : ''}`, candidates: [] };
  if (through) return { ok: false, reason: `${LOGITS} also depends on ${through}, so the LM head is not certain`, candidates: heads };
  if (head.problem) return { ok: false, reason: `the LM head ${nodeLabel(head.node)}: ${head.problem}`, candidates: [head] };
  return { ok: true, head };
}

/**
 * Every MatMul/Gemm whose weight maps onto the vocabulary (a graph viewer's view of "what could the
 * LM head be"); when the vocabulary size is unknown, the heads found by walking back from `logits`.
 */
export function hiddenStateCandidates(index: GraphIndex): HeadCandidate[] {
  const vocab = vocabSize(index);
  if (vocab === undefined) return traceHeads(index).heads;
  return index.graph.node
    .filter((n) => HEAD_OPS.has(n.opType))
    .map((n) => headCandidate(index, n))
    .filter((c) => c.outFeatures === vocab && !c.problem);
}
