/**
 * Hub folders made from the real stories260K exports with one thing changed, for `models optimize`'s
 * tests: the config.json edited, or the graph edited the way a different checkpoint would export it
 * (Qwen2's q/k/v biases as an Add after each projection's MatMul, an LM head that is not the embedding).
 * The edited export runs as it is in onnxruntime, so it is the reference its rebuild is compared with.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { NodeProtoSchema, type ModelProto } from 'onnx-buf';
import { tensor } from '../../src/shared/model/onnx-graph.ts';
import { initializerFloats } from '../../src/tools/models/initializer-data.ts';
import { readModel, writeModel } from '../../src/tools/models/onnx-file.ts';
import { HF_EXPORTS } from './hub-export-packs.ts';

type Json = Record<string, unknown>;

export interface HubEdit {
  /** The export folder the graph comes from. */
  modelFrom: string;
  /** The export folder config.json comes from (default: modelFrom). */
  configFrom?: string;
  config?: (config: Json) => void;
  graph?: (model: ModelProto) => void;
}

/** `root/name`: model.onnx and config.json of the edited export. */
export function editedHub(root: string, name: string, edit: HubEdit): string {
  const dir = join(root, name);
  mkdirSync(dir);
  const modelPath = join(HF_EXPORTS, edit.modelFrom, 'model.onnx');
  if (edit.graph) {
    const model = readModel(modelPath);
    edit.graph(model);
    writeModel(model, join(dir, 'model.onnx'));
  } else {
    copyFileSync(modelPath, join(dir, 'model.onnx'));
  }
  const config = JSON.parse(readFileSync(join(HF_EXPORTS, edit.configFrom ?? edit.modelFrom, 'config.json'), 'utf8')) as Json;
  edit.config?.(config);
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  return dir;
}

/** Deterministic values in [-scale, scale] (no two projections alike). */
function wave(count: number, phase: number, scale: number): Float32Array {
  return Float32Array.from({ length: count }, (_, i) => scale * Math.sin(0.7 * i + phase));
}

/**
 * Inserts `MatMul → Add(bias)` after the named projections of every layer (`q`, `k`, `v`, `o`), as
 * torch exports a `Linear` with a bias: the Add takes the MatMul's output name, so consumers see the sum.
 */
export function addProjectionBiases(model: ModelProto, projections: readonly string[]): void {
  const graph = model.graph!;
  const pattern = new RegExp(`/self_attn/(${projections.join('|')})_proj/MatMul$`);
  const shapes = new Map(graph.initializer.map((t) => [t.name, t.dims.map(Number)]));
  let phase = 0;
  graph.node = graph.node.flatMap((node) => {
    if (!pattern.test(node.name)) return [node];
    const out = node.output[0]!;
    const scope = node.name.slice(0, -'/MatMul'.length);
    const cols = shapes.get(node.input[1]!)!.at(-1)!;
    const bias = `${scope.slice(1).replaceAll('/', '.')}.bias`;
    graph.initializer.push(tensor(bias, wave(cols, (phase += 1), 0.5), [cols]));
    node.output[0] = `${out}/no_bias`;
    return [node, create(NodeProtoSchema, { name: `${scope}/Add`, opType: 'Add', input: [`${out}/no_bias`, bias], output: [out] })];
  });
}

/** Makes the LM head's weight differ from the transposed embedding (an untied head). */
export function untieLmHead(model: ModelProto): void {
  const graph = model.graph!;
  const head = graph.node.find((n) => n.name.endsWith('/lm_head/MatMul'))!;
  const at = graph.initializer.findIndex((t) => t.name === head.input[1]);
  const old = graph.initializer[at]!;
  const values = initializerFloats(old, 'lm_head');
  const noise = wave(values.length, 0.3, 0.05);
  graph.initializer[at] = tensor(
    old.name,
    values.map((v, i) => v + noise[i]!),
    old.dims.map(Number),
  );
}
