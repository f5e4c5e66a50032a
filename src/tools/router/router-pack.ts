/**
 * Writes a router pack: `router.onnx` (hidden_states float [batch, hidden] → score float [batch]),
 * `router.json` (what `OnnxRouter.load` reads) and `pack-source.json` (the inputs it was made from, so
 * `models demo` can tell whether it is up to date). The folder appears whole or not at all.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelProto } from 'onnx-buf';
import type { RouterJson } from '../../edge/router.ts';
import { writeFolderAtomically } from '../models/atomic-output.ts';
import { DataType, GraphBuilder } from '../models/onnx-graph.ts';
import { writeModel } from '../models/onnx-file.ts';
import { PACK_SOURCE_FILE } from '../models/pack-writer.ts';
import { foldStandardization, MAX_SCORE, type MlpWeights } from './mlp.ts';

/** Gemm → Relu → Gemm → Sigmoid → Min(MAX_SCORE) → Squeeze, standardization folded into the first Gemm. */
export function buildRouterGraph(weights: MlpWeights): ModelProto {
  const { inputSize, hiddenUnits } = weights;
  const folded = foldStandardization(weights);
  const g = new GraphBuilder('router-mlp');
  const x = g.input('hidden_states', DataType.FLOAT, ['batch', inputSize]);
  const hidden = g.op('Gemm', [x, g.floats('fc1.weight', folded.w1, [inputSize, hiddenUnits]), g.floats('fc1.bias', folded.b1, [hiddenUnits])]);
  const relu = g.op('Relu', [hidden]);
  const logit = g.op('Gemm', [relu, g.floats('fc2.weight', weights.w2, [hiddenUnits, 1]), g.floats('fc2.bias', [weights.b2], [1])]);
  const probability = g.op('Sigmoid', [logit]);
  // Capped below 1 so that τ = 1 routes every token, as the TypeScript MLP does.
  const capped = g.op('Min', [probability, g.floats('max_score', [MAX_SCORE], [])]);
  const score = g.op('Squeeze', [capped, g.ints('squeeze_axes', [1])]);
  g.output(score, 'score', DataType.FLOAT, ['batch']);
  return g.toModel({ hidden_size: String(inputSize), hidden_units: String(hiddenUnits) });
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export async function writeRouterPack(
  out: string,
  contents: { weights: MlpWeights; meta: RouterJson; source: Record<string, unknown> },
): Promise<void> {
  const model = buildRouterGraph(contents.weights);
  await writeFolderAtomically(out, (dir) => {
    writeModel(model, join(dir, 'router.onnx'));
    writeFileSync(join(dir, 'router.json'), json(contents.meta));
    writeFileSync(join(dir, PACK_SOURCE_FILE), json(contents.source));
  });
}
