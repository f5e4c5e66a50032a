/**
 * Writes a router pack: `router.onnx` (hidden_states float [batch, hidden], plus previous_hidden_states
 * float [batch, hidden] when the router reads the previous position's, plus extra_features float [batch, k]
 * when it reads computed features, plus proposed_token int64 [batch] when it reads the proposed token →
 * score float [batch]),
 * `router.json` (what `OnnxRouter.load` reads) and `pack-source.json` (the inputs it was made from, so
 * `models demo` can tell whether it is up to date). The folder appears whole or not at all.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelProto } from 'onnx-buf';
import type { RouterJson } from '../../edge/routing/router.ts';
import { extraWidth, readsPreviousHidden, type FeatureGroup } from '../../edge/routing/router-features.ts';
import { inputWidth } from '../lab/feature-matrix.ts';
import { writeFolderAtomically } from '../models/atomic-output.ts';
import type { OutputClaim } from '../models/output-ownership.ts';
import { DataType, GraphBuilder } from '../../shared/model/onnx-graph.ts';
import { writeModel } from '../models/onnx-file.ts';
import { PACK_SOURCE_FILE } from '../models/pack-writer.ts';
import { foldStandardization, MAX_SCORE, type MlpWeights, type TokenVectors } from './mlp.ts';

/**
 * [Concat] → Gemm → Relu → Gemm → Sigmoid → Min(MAX_SCORE) → Squeeze, standardization folded into the
 * first Gemm. The MLP's input is the hidden state, then the previous position's and the extra features
 * when the router reads them, concatenated inside the graph, so one ONNX call still does all the
 * router's arithmetic. A router with token vectors adds the proposed token's vector to the first Gemm's
 * output: Gather(token_row) maps the id to its row (ids past the vocabulary are clamped to its size,
 * whose entry is the shared row), and Gather(token_vectors) picks that row.
 */
export function buildRouterGraph(weights: MlpWeights, hiddenSize: number, features: readonly FeatureGroup[]): ModelProto {
  const { inputSize, hiddenUnits } = weights;
  if (inputSize !== inputWidth(hiddenSize, features)) {
    throw new Error(`internal: an MLP over ${inputSize} inputs does not fit hidden size ${hiddenSize} with ${features.join(', ')}`);
  }
  const extraCols = extraWidth(features);
  const folded = foldStandardization(weights);
  const g = new GraphBuilder('router-mlp');
  const parts = [g.input('hidden_states', DataType.FLOAT, ['batch', hiddenSize])];
  if (readsPreviousHidden(features)) parts.push(g.input('previous_hidden_states', DataType.FLOAT, ['batch', hiddenSize]));
  if (extraCols > 0) parts.push(g.input('extra_features', DataType.FLOAT, ['batch', extraCols]));
  const x = parts.length > 1 ? g.op('Concat', parts, { axis: 1 }) : parts[0]!;
  const dense = g.op('Gemm', [x, g.floats('fc1.weight', folded.w1, [inputSize, hiddenUnits]), g.floats('fc1.bias', folded.b1, [hiddenUnits])]);
  const hidden = weights.tokens ? g.op('Add', [dense, tokenVectorOf(g, weights.tokens, hiddenUnits)]) : dense;
  const relu = g.op('Relu', [hidden]);
  const logit = g.op('Gemm', [relu, g.floats('fc2.weight', weights.w2, [hiddenUnits, 1]), g.floats('fc2.bias', [weights.b2], [1])]);
  const probability = g.op('Sigmoid', [logit]);
  // Capped below 1 so that τ = 1 routes every token, as the TypeScript MLP does.
  const capped = g.op('Min', [probability, g.floats('max_score', [MAX_SCORE], [])]);
  const score = g.op('Squeeze', [capped, g.ints('squeeze_axes', [1])]);
  g.output(score, 'score', DataType.FLOAT, ['batch']);
  return g.toModel({
    hidden_size: String(hiddenSize),
    previous_hidden: String(readsPreviousHidden(features)),
    extra_features: String(extraCols),
    hidden_units: String(hiddenUnits),
  });
}

/** proposed_token [batch] → its row of the token vectors, [batch, hiddenUnits]. */
function tokenVectorOf(g: GraphBuilder, tokens: TokenVectors, hiddenUnits: number): string {
  const shared = tokens.ids.length;
  const rowOf = new Array<number>(tokens.vocabSize + 1).fill(shared);
  tokens.ids.forEach((id, row) => (rowOf[id] = row));
  const proposed = g.input('proposed_token', DataType.INT64, ['batch']);
  const clamped = g.op('Min', [proposed, g.ints('token_vocab_size', [tokens.vocabSize], [])]);
  const row = g.op('Gather', [g.ints('token_row', rowOf), clamped], { axis: 0 });
  return g.op('Gather', [g.floats('token_vectors', tokens.vectors, [shared + 1, hiddenUnits]), row], { axis: 0 });
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** The marker's name for router packs (output-ownership.ts). */
export const ROUTER_TRAIN_TOOL = 'router train';

export async function writeRouterPack(
  out: string,
  contents: { weights: MlpWeights; meta: RouterJson; source: Record<string, unknown> },
  claim: OutputClaim = { tool: ROUTER_TRAIN_TOOL },
): Promise<void> {
  const model = buildRouterGraph(contents.weights, contents.meta.hidden_size, contents.meta.features ?? ['hidden']);
  await writeFolderAtomically(out, claim, (dir) => {
    writeModel(model, join(dir, 'router.onnx'));
    writeFileSync(join(dir, 'router.json'), json(contents.meta));
    writeFileSync(join(dir, PACK_SOURCE_FILE), json(contents.source));
  });
}
