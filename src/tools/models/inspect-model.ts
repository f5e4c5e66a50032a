/**
 * `models inspect`: what a model file holds, as a graph viewer would list it: inputs and outputs with
 * types and (symbolic) shapes, op counts, weights, and the tensors that could be exposed as
 * `hidden_states`, marking the one `expose-hidden` would choose.
 *
 * It also says how the edge would run the file (the same reading `DecoderModel.load` does): the ids' and
 * mask's integer types, whether `position_ids` is fed, the KV cache's float type, and the logits' and
 * hidden states' types, or why the edge would refuse the file.
 *
 * A pack folder is inspected file by file: a hub folder holds several variants of one model.
 *
 * @example
 * console.log(formatInspection(inspectModel('models/stories260k/model.onnx')));
 * for (const d of inspectPath('qwen2.5-0.5b')) console.log(formatInspection(d));
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { TensorProto_DataLocation, type TensorProto } from 'onnx-buf';
import { type DecoderIo, formatDecoderIo, readDecoderIo } from '../../shared/model/decoder-io.ts';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { modelFiles } from '../../shared/model/model-pack.ts';
import { elemBits, elemTypeName, formatDims, GraphIndex, type TensorType } from './graph-index.ts';
import { decideHead, HIDDEN_STATES, hiddenStateCandidates, LOGITS, nodeLabel, vocabSize } from './lm-head.ts';
import { allNodes, type Dim } from '../../shared/model/onnx-graph.ts';
import { externalDataFiles, readModel } from './onnx-file.ts';

export interface TensorDescription {
  name: string;
  /** `float32`, `int64`, ...; `unknown` when the graph does not declare it. */
  elemType: string;
  /** Absent when the graph declares no shape. */
  shape?: Dim[];
}

export interface HiddenStateCandidateDescription extends TensorDescription {
  /** The MatMul/Gemm the tensor feeds, e.g. `/lm_head/MatMul (MatMul)`. */
  node: string;
  weight?: string;
  weightShape?: number[];
  /** The one `expose-hidden` would expose without `--node`. */
  chosen: boolean;
}

export interface ModelDescription {
  path: string;
  irVersion: number;
  producer: string;
  opsets: { domain: string; version: number }[];
  inputs: TensorDescription[];
  outputs: TensorDescription[];
  nodeCount: number;
  /** Op types by descending count (`com.microsoft.` prefixed for other domains). */
  opCounts: { opType: string; count: number }[];
  initializers: { count: number; parameters: number; bytes: number; external: boolean; dataFiles: string[] };
  vocabSize?: number;
  hasHiddenStates: boolean;
  candidates: HiddenStateCandidateDescription[];
  /** Why no candidate is chosen automatically, when none is. */
  headProblem?: string;
  /** How the edge would feed and read the model, or why it would refuse it. */
  edge: { io: DecoderIo } | { refused: string };
}

/** A model file, or every `.onnx` file of a pack folder (alphabetically). */
export function inspectPath(path: string): ModelDescription[] {
  let isFolder: boolean;
  try {
    isFolder = statSync(path).isDirectory();
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read (${errorMessage(e)})`);
  }
  if (!isFolder) return [inspectModel(path)];
  const files = modelFiles(path);
  if (!files.length) throw new AppError('NOT_FOUND', `${path}: a folder with no .onnx file (not a model pack)`);
  return files.map((f) => inspectModel(join(path, f)));
}

/** The reading `DecoderModel.load` does on a session, here from the graph's declarations. */
function edgeReading(path: string, inputs: readonly TensorDescription[], outputs: readonly TensorDescription[]): ModelDescription['edge'] {
  // The layer count comes from the cache inputs themselves (at least one, so a model without a cache is refused by name).
  const layers = new Set(inputs.map((i) => /^past_key_values\.(\d+)\.key$/.exec(i.name)?.[1]).filter((l) => l !== undefined));
  try {
    return {
      io: readDecoderIo({
        where: path,
        numLayers: Math.max(1, layers.size),
        inputs: inputs.map((i) => ({ name: i.name, type: i.elemType })),
        outputs: outputs.map((o) => ({ name: o.name, type: o.elemType })),
      }),
    };
  } catch (e) {
    return { refused: errorMessage(e) };
  }
}

export function inspectModel(path: string): ModelDescription {
  const model = readModel(path);
  const graph = model.graph!;
  const index = new GraphIndex(graph);
  const decision = decideHead(index);
  const chosen = decision.ok ? decision.head : undefined;
  const candidates = hiddenStateCandidates(index);
  if (chosen && !candidates.some((c) => c.node === chosen.node)) candidates.push(chosen);
  const vocab = vocabSize(index);
  const dataFiles = externalDataFiles(model);
  const inputs = graph.input.filter((i) => !index.initializer(i.name)).map((i) => describe(i.name, index.declaredType(i.name)));
  const outputs = graph.output.map((o) => describe(o.name, index.declaredType(o.name)));
  return {
    path,
    irVersion: Number(model.irVersion),
    producer: [model.producerName, model.producerVersion].filter(Boolean).join(' '),
    opsets: model.opsetImport.map((o) => ({ domain: o.domain || 'ai.onnx', version: Number(o.version) })),
    inputs,
    outputs,
    nodeCount: [...allNodes(graph)].length,
    opCounts: countOps([...allNodes(graph)].map((n) => (n.domain && n.domain !== 'ai.onnx' ? `${n.domain}.${n.opType}` : n.opType))),
    initializers: { ...weightTotals(graph.initializer), external: dataFiles.length > 0, dataFiles },
    ...(vocab !== undefined ? { vocabSize: vocab } : {}),
    hasHiddenStates: graph.output.some((o) => o.name === HIDDEN_STATES),
    candidates: candidates.map((c) => ({
      ...describe(c.tensor, c.type),
      node: nodeLabel(c.node),
      ...(c.weight ? { weight: c.weight } : {}),
      ...(c.weightShape ? { weightShape: c.weightShape } : {}),
      chosen: c.node === chosen?.node,
    })),
    ...(decision.ok ? {} : { headProblem: decision.reason }),
    edge: edgeReading(path, inputs, outputs),
  };
}

function describe(name: string, type: TensorType | undefined): TensorDescription {
  return { name, elemType: type ? elemTypeName(type.elemType) : 'unknown', ...(type?.dims ? { shape: type.dims } : {}) };
}

function countOps(opTypes: string[]): { opType: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const t of opTypes) counts.set(t, (counts.get(t) ?? 0) + 1);
  return [...counts].map(([opType, count]) => ({ opType, count })).sort((a, b) => b.count - a.count || a.opType.localeCompare(b.opType));
}

function weightTotals(initializers: readonly TensorProto[]): { count: number; parameters: number; bytes: number } {
  let parameters = 0;
  let bytes = 0;
  for (const t of initializers) {
    const n = t.dims.reduce((a, d) => a * Number(d), 1);
    parameters += n;
    const stored = t.dataLocation === TensorProto_DataLocation.EXTERNAL ? Number(t.externalData.find((e) => e.key === 'length')?.value) : NaN;
    bytes += Number.isFinite(stored) ? stored : Math.ceil((n * elemBits(t.dataType)) / 8);
  }
  return { count: initializers.length, parameters, bytes };
}

const number = (n: number) => n.toLocaleString('en-US');

function mebibytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / (1024 * 1024)).toFixed(1)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
}

function tensorRows(tensors: readonly TensorDescription[]): string[] {
  const width = Math.max(0, ...tensors.map((t) => t.name.length));
  return tensors.map((t) => `  ${t.name.padEnd(width)}  ${t.elemType.padEnd(8)} ${formatDims(t.shape)}`);
}

/** The description as terminal text, one section per kind of thing. */
export function formatInspection(d: ModelDescription): string {
  const opsets = d.opsets.map((o) => `${o.domain} ${o.version}`).join(', ');
  const lines = [`${d.path}`, `  ir ${d.irVersion}, opsets ${opsets}${d.producer ? `, producer ${d.producer}` : ''}`, '', 'inputs'];
  lines.push(...tensorRows(d.inputs), '', 'outputs', ...tensorRows(d.outputs), '');
  lines.push(`ops (${number(d.nodeCount)} nodes)`, `  ${d.opCounts.map((o) => `${o.opType} ${o.count}`).join(', ')}`, '');
  const w = d.initializers;
  const where = w.external ? `external data: ${w.dataFiles.join(', ')}` : 'stored in the model file';
  lines.push('weights', `  ${number(w.count)} initializers, ${number(w.parameters)} parameters, ${mebibytes(w.bytes)}, ${where}`, '');

  lines.push(`hidden states: ${d.hasHiddenStates ? `${HIDDEN_STATES} output present` : `no ${HIDDEN_STATES} output`}`);
  const vocab = d.vocabSize !== undefined ? `weight maps onto the ${number(d.vocabSize)}-token vocabulary` : `reaches ${LOGITS}`;
  lines.push(`  candidates (input of a MatMul/Gemm whose ${vocab}):`);
  const width = Math.max(0, ...d.candidates.map((c) => c.name.length));
  for (const c of d.candidates) {
    const weight = c.weight ? `, weight ${c.weight} ${formatDims(c.weightShape)}` : '';
    lines.push(`  ${c.chosen ? '*' : ' '} ${c.name.padEnd(width)}  ${c.elemType.padEnd(8)} ${formatDims(c.shape)}  → ${c.node}${weight}`);
  }
  if (!d.candidates.length) lines.push('    none');
  lines.push(d.headProblem ? `  not chosen automatically: ${d.headProblem} (use expose-hidden --node)` : '  * = the LM head input, what expose-hidden exposes');
  lines.push('', 'on the edge');
  if ('io' in d.edge)
    lines.push(
      ...formatDecoderIo(d.edge.io)
        .split('\n')
        .map((l) => `  ${l}`),
    );
  else lines.push(`  refused: ${d.edge.refused}`);
  return lines.join('\n');
}
