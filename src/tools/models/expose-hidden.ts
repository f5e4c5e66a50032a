/**
 * `models expose-hidden`: adds the `hidden_states` output (the LM head's input, after the final norm)
 * to an existing decoder export, so a third-party model can serve as the edge model of a router.
 *
 * The graph gains one Identity node (`tensor → hidden_states`) and one output; nothing else changes,
 * and external weights are referred to, never rewritten (see write-beside-data.ts).
 *
 * A model that already has `hidden_states` is left as it is: the result says `unchanged`, and the
 * output is a byte-identical copy of the input (with its data files placed beside it), or nothing is
 * written at all when the output is the input. Either way a second run is a no-op on the model.
 *
 * @example
 * const r = await exposeHiddenStates({ input: 'qwen/model.onnx', output: 'qwen-edge/model.onnx' });
 * console.log(r.status, r.tensor); // added /model/norm/Mul_1_output_0
 */
import { copyFileSync, existsSync, realpathSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { NodeProtoSchema, ValueInfoProtoSchema, type ModelProto, type ValueInfoProto } from 'onnx-buf';
import { AppError } from '../../shared/errors.ts';
import { DEFAULT_MODEL_FILE, modelFiles } from '../../shared/model/model-pack.ts';
import { formatDims, GraphIndex, type TensorType } from './graph-index.ts';
import { decideHead, describeCandidate, type HeadCandidate, HIDDEN_STATES, hiddenStateCandidates, nodeLabel, traceHeads } from './lm-head.ts';
import { externalDataFiles, readModel, writeModel } from './onnx-file.ts';
import { valueInfo } from '../../shared/model/onnx-graph.ts';
import { checkDataFiles, writeModelBesideData } from './write-beside-data.ts';

export interface ExposeHiddenOptions {
  /** A model file, or a pack folder (its model.onnx). */
  input: string;
  /** A model file, or an existing folder (the input's file name inside it). */
  output: string;
  /** Names the tensor to expose instead of finding the LM head. */
  node?: string;
  /** Replace an existing regular file at the output (and same-named data files beside it). */
  force?: boolean;
}

export interface ExposeHiddenResult {
  /** `added`: the output was added; `unchanged`: the model already had a `hidden_states` output. */
  status: 'added' | 'unchanged';
  /** The tensor `hidden_states` is (the head's activation input, or the one named with `node`). */
  tensor: string;
  /** The declared type and shape; absent when neither the graph nor the head tell (onnxruntime infers it). */
  type?: TensorType;
  /** The LM head, when it was found automatically. */
  head?: string;
  /** External data files the output refers to, and those that were linked/copied beside it. */
  dataFiles: string[];
  placedDataFiles: string[];
  /** False only for an already-patched model patched in place. */
  written: boolean;
  /** The file written (or that would have been): `output`, or the input's name inside an output folder. */
  output: string;
}

function isFolder(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** A pack folder as input means its default file; an output folder keeps the input's file name. */
export function resolveExposePaths(input: string, output: string): { input: string; output: string } {
  let file = input;
  if (isFolder(input)) {
    file = join(input, DEFAULT_MODEL_FILE);
    if (!existsSync(file)) {
      const found = modelFiles(input);
      throw new AppError(
        'NOT_FOUND',
        `${input}: no ${DEFAULT_MODEL_FILE} in this folder${found.length ? `; name one of ${found.join(', ')} as --in` : ' (not a model pack)'}`,
      );
    }
  }
  return { input: file, output: isFolder(output) ? join(output, basename(file)) : output };
}

export async function exposeHiddenStates(options: ExposeHiddenOptions): Promise<ExposeHiddenResult> {
  const { input, output } = resolveExposePaths(options.input, options.output);
  return { ...(await exposeFile(input, output, options.node, options.force === true)), output };
}

async function exposeFile(input: string, output: string, node: string | undefined, force: boolean): Promise<Omit<ExposeHiddenResult, 'output'>> {
  const model = readModel(input);
  const index = new GraphIndex(model.graph!);
  const dataFiles = externalDataFiles(model);
  checkDataFiles(input, dataFiles);

  const existing = existingSource(index);
  if (existing !== undefined) {
    if (node && node !== existing && node !== HIDDEN_STATES) {
      throw new AppError('FAILED_PRECONDITION', `${input}: already has a ${HIDDEN_STATES} output (from ${existing}), not replacing it with ${node}`);
    }
    const base = { status: 'unchanged' as const, tensor: existing, dataFiles };
    const type = index.declaredType(HIDDEN_STATES);
    if (sameFile(input, output)) return { ...base, ...(type ? { type } : {}), placedDataFiles: [], written: false };
    const placed = await writeModelBesideData({ source: input, target: output, dataFiles, force, writeModelFile: (p) => copyFileSync(input, p) });
    return { ...base, ...(type ? { type } : {}), placedDataFiles: placed, written: true };
  }

  const choice = node ? namedTensor(index, input, node) : foundHead(index, input);
  if (choice.tensor !== HIDDEN_STATES && index.hasName(HIDDEN_STATES)) {
    throw new AppError('FAILED_PRECONDITION', `${input}: the graph already uses the name ${HIDDEN_STATES} for another value`);
  }
  addOutput(model, choice.tensor, choice.type);
  const placed = await writeModelBesideData({ source: input, target: output, dataFiles, force, writeModelFile: (p) => writeModel(model, p) });
  return {
    status: 'added',
    tensor: choice.tensor,
    ...(choice.type ? { type: choice.type } : {}),
    ...(choice.head ? { head: choice.head } : {}),
    dataFiles,
    placedDataFiles: placed,
    written: true,
  };
}

interface Choice {
  tensor: string;
  type?: TensorType;
  head?: string;
}

/** The tensor an existing `hidden_states` output shows (through our Identity), if there is one. */
function existingSource(index: GraphIndex): string | undefined {
  if (!index.graph.output.some((o) => o.name === HIDDEN_STATES)) return undefined;
  const producer = index.producer(HIDDEN_STATES);
  return producer?.opType === 'Identity' && producer.input[0] ? producer.input[0] : HIDDEN_STATES;
}

function foundHead(index: GraphIndex, input: string): Choice {
  const decision = decideHead(index);
  if (!decision.ok) {
    const candidates = decision.candidates.length ? decision.candidates : hiddenStateCandidates(index);
    throw new AppError('FAILED_PRECONDITION', `${input}: ${decision.reason}; ${listCandidates(candidates)}; name the tensor with --node`);
  }
  const { head } = decision;
  return { tensor: head.tensor, type: head.type, head: nodeLabel(head.node) };
}

function namedTensor(index: GraphIndex, input: string, name: string): Choice {
  if (!index.isRuntimeValue(name)) {
    const what = index.initializer(name) ? `${name} is a weight, not an activation` : `no tensor named ${name} in the graph`;
    throw new AppError('INVALID_ARGUMENT', `${input}: ${what}; ${listCandidates(knownCandidates(index))}`);
  }
  const candidate = knownCandidates(index).find((c) => c.tensor === name);
  const type = index.declaredType(name) ?? candidate?.type;
  return { tensor: name, ...(type ? { type } : {}) };
}

/** Candidates by vocabulary size, plus whatever walking back from `logits` reaches. */
function knownCandidates(index: GraphIndex): HeadCandidate[] {
  const byVocab = hiddenStateCandidates(index);
  const traced = traceHeads(index).heads.filter((h) => !byVocab.some((c) => c.node === h.node));
  return [...byVocab, ...traced];
}

function listCandidates(candidates: readonly HeadCandidate[]): string {
  if (!candidates.length) return 'no candidate tensors (no MatMul/Gemm maps onto the vocabulary)';
  return `candidates: ${candidates.map(describeCandidate).join('; ')}`;
}

function addOutput(model: ModelProto, tensor: string, type: TensorType | undefined): void {
  const graph = model.graph!;
  if (tensor !== HIDDEN_STATES) {
    const names = new Set(graph.node.map((n) => n.name));
    let name = '/expose_hidden/Identity';
    for (let i = 1; names.has(name); i++) name = `/expose_hidden/Identity_${i}`;
    graph.node.push(create(NodeProtoSchema, { opType: 'Identity', name, input: [tensor], output: [HIDDEN_STATES] }));
  }
  graph.output.push(outputInfo(type));
}

function outputInfo(type: TensorType | undefined): ValueInfoProto {
  if (type?.dims) return valueInfo(HIDDEN_STATES, type.elemType, type.dims);
  if (type) return create(ValueInfoProtoSchema, { name: HIDDEN_STATES, type: { value: { case: 'tensorType', value: { elemType: type.elemType } } } });
  return create(ValueInfoProtoSchema, { name: HIDDEN_STATES });
}

function sameFile(a: string, b: string): boolean {
  return existsSync(b) && realpathSync(a) === realpathSync(resolve(b));
}

/** One line for the terminal. */
export function formatExposeResult(r: ExposeHiddenResult, output: string = r.output): string {
  const shape = r.type?.dims ? ` ${formatDims(r.type.dims)}` : '';
  if (r.status === 'unchanged') {
    return r.written
      ? `${HIDDEN_STATES} already present (from ${r.tensor}); copied unchanged to ${output}`
      : `${HIDDEN_STATES} already present (from ${r.tensor}); nothing written`;
  }
  const from = r.head ? `input of LM head ${r.head}` : 'named with --node';
  const data = r.placedDataFiles.length ? `; linked/copied ${r.placedDataFiles.join(', ')}` : '';
  return `wrote ${output}: ${HIDDEN_STATES}${shape} = ${r.tensor} (${from})${data}`;
}
