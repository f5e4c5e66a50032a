/**
 * Builds the ONNX graph of a decoder with a KV cache, using the names Hugging Face exports use:
 * inputs `input_ids`, `attention_mask`, `position_ids`, `past_key_values.{i}.key|value`;
 * outputs `logits`, `present.{i}.key|value` and, for routing, `hidden_states` (the final-norm output
 * that feeds the LM head).
 */
import type { ModelProto } from 'onnx-buf';
import { checkSpec, type DecoderSpec, type DecoderWeights } from './decoder-spec.ts';
import { addDecoderOutputs, addLmHead } from './decoder-graph-head.ts';
import { buildFusedDecoderGraph } from './decoder-graph-fused.ts';
import type { DecoderGraphOptions } from './decoder-graph-options.ts';
import { DataType, GraphBuilder } from '../../shared/model/onnx-graph.ts';

export { transpose } from './decoder-graph-head.ts';

export { DECODER_LAYOUTS, type DecoderGraphOptions, type DecoderLayout } from './decoder-graph-options.ts';

const MASKED = -1e9;

export function buildDecoderGraph(spec: DecoderSpec, weights: DecoderWeights, options: DecoderGraphOptions): ModelProto {
  checkSpec(spec);
  if (options.layout === 'fused') return buildFusedDecoderGraph(spec, weights, options);
  const { hiddenSize: d, numHeads: h, numKvHeads: kv, headDim: hd, vocabSize: vocab } = spec;
  const g = new GraphBuilder(`${spec.modelType}-decoder`);

  const inputIds = g.input('input_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const attentionMask = g.input('attention_mask', DataType.INT64, ['batch_size', 'total_sequence_length']);
  const positionIds = g.input('position_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const past = weights.layers.map((_, i) => ({
    key: g.input(`past_key_values.${i}.key`, DataType.FLOAT, ['batch_size', kv, 'past_sequence_length', hd]),
    value: g.input(`past_key_values.${i}.value`, DataType.FLOAT, ['batch_size', kv, 'past_sequence_length', hd]),
  }));

  const embed = g.floats('model.embed_tokens.weight', weights.embed, [vocab, d]);
  const axisLast = g.ints('const.axis_last', [-1]);
  const eps = g.floats('const.rms_eps', [spec.rmsNormEps], []);
  const rmsNorm = (x: string, weight: string): string => {
    const meanSquare = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: [-1], keepdims: 1 });
    const rms = g.op('Sqrt', [g.op('Add', [meanSquare, eps])]);
    return g.op('Mul', [g.op('Div', [x, rms]), weight]);
  };

  // Rotary tables for the positions of this call: [batch, 1, seq, headDim].
  const invFreq = Float32Array.from({ length: hd / 2 }, (_, j) => spec.ropeTheta ** (-(2 * j) / hd));
  const angles = g.op('Mul', [
    g.op('Unsqueeze', [g.op('Cast', [positionIds], { to: DataType.FLOAT }), axisLast]),
    g.floats('const.inv_freq', invFreq, [hd / 2]),
  ]);
  const fullAngles = g.op('Concat', [angles, angles], { axis: -1 });
  const axisOne = g.ints('const.axis_1', [1]);
  const cos = g.op('Unsqueeze', [g.op('Cos', [fullAngles]), axisOne]);
  const sin = g.op('Unsqueeze', [g.op('Sin', [fullAngles]), axisOne]);
  const halves = g.ints('const.rope_halves', [hd / 2, hd / 2]);
  const rotate = (x: string): string => {
    const [x1, x2] = g.ops('Split', [x, halves], { axis: -1 }, 2) as [string, string];
    const rotated = g.op('Concat', [g.op('Neg', [x2]), x1], { axis: -1 });
    return g.op('Add', [g.op('Mul', [x, cos]), g.op('Mul', [rotated, sin])]);
  };

  // Additive mask [batch, 1, seq, total]: key j is visible to query i (absolute position past+i) when
  // j <= past+i and attention_mask[j] = 1.
  const seqLen = g.op('Shape', [inputIds], { start: 1, end: 2 });
  const totalLen = g.op('Shape', [attentionMask], { start: 1, end: 2 });
  const scalar = (x: string) => g.op('Squeeze', [x]);
  const zero = g.ints('const.zero', [0], []);
  const one = g.ints('const.one', [1], []);
  const queryPositions = g.op('Range', [scalar(g.op('Sub', [totalLen, seqLen])), scalar(totalLen), one]);
  const keyPositions = g.op('Range', [zero, scalar(totalLen), one]);
  const causal = g.op('LessOrEqual', [g.op('Unsqueeze', [keyPositions, g.ints('const.axis_0', [0])]), g.op('Unsqueeze', [queryPositions, axisOne])]);
  const padding = g.op('Unsqueeze', [g.op('Cast', [attentionMask], { to: DataType.BOOL }), g.ints('const.axes_1_2', [1, 2])]);
  const maskBias = g.op('Where', [g.op('And', [causal, padding]), g.floats('const.visible', [0], []), g.floats('const.masked', [MASKED], [])]);

  const shapeHeads = g.ints('const.shape_heads', [0, 0, h, hd]);
  const shapeKvHeads = g.ints('const.shape_kv_heads', [0, 0, kv, hd]);
  // Grouped-query attention without copying K/V: query heads that share a KV head are folded into
  // the sequence axis ([b, kv, group*seq, hd]) so one MatMul per KV head serves the whole group.
  const shapeGrouped = g.ints('const.shape_grouped', [0, kv, -1, hd]);
  const shapeScores = g.ints('const.shape_scores', [0, h, -1, 0]);
  const shapeGroupedScores = g.ints('const.shape_grouped_scores', [0, kv, -1, 0]);
  const shapeMerged = g.ints('const.shape_merged', [0, 0, h * hd]);
  const shapeAttn = g.ints('const.shape_attn', [0, h, -1, hd]);
  const scale = g.floats('const.attn_scale', [1 / Math.sqrt(hd)], []);
  const toHeads = (x: string, shape: string) => g.op('Transpose', [g.op('Reshape', [x, shape])], { perm: [0, 2, 1, 3] });

  let x = g.op('Gather', [embed, inputIds]);
  weights.layers.forEach((layer, i) => {
    const p = `model.layers.${i}`;
    const hNorm = rmsNorm(x, g.floats(`${p}.input_layernorm.weight`, layer.attnNorm, [d]));
    const project = (w: Float32Array, b: Float32Array | undefined, name: string, out: number) => {
      const y = g.op('MatMul', [hNorm, g.floats(`${p}.self_attn.${name}.weight`, w, [d, out])]);
      return b ? g.op('Add', [y, g.floats(`${p}.self_attn.${name}.bias`, b, [out])]) : y;
    };
    const q = rotate(toHeads(project(layer.wq, layer.bq, 'q_proj', h * hd), shapeHeads));
    const k = rotate(toHeads(project(layer.wk, layer.bk, 'k_proj', kv * hd), shapeKvHeads));
    const v = toHeads(project(layer.wv, layer.bv, 'v_proj', kv * hd), shapeKvHeads);
    const keys = g.op('Concat', [past[i]!.key, k], { axis: 2 }, [`present.${i}.key`]);
    const values = g.op('Concat', [past[i]!.value, v], { axis: 2 }, [`present.${i}.value`]);

    const groupedScores = g.op('MatMul', [g.op('Reshape', [g.op('Mul', [q, scale]), shapeGrouped]), g.op('Transpose', [keys], { perm: [0, 1, 3, 2] })]);
    const scores = g.op('Add', [g.op('Reshape', [groupedScores, shapeScores]), maskBias]);
    const probs = g.op('Softmax', [scores], { axis: -1 });
    const attn = g.op('Reshape', [g.op('MatMul', [g.op('Reshape', [probs, shapeGroupedScores]), values]), shapeAttn]);
    const merged = g.op('Reshape', [g.op('Transpose', [attn], { perm: [0, 2, 1, 3] }), shapeMerged]);
    x = g.op('Add', [x, g.op('MatMul', [merged, g.floats(`${p}.self_attn.o_proj.weight`, layer.wo, [h * hd, d])])]);

    const fNorm = rmsNorm(x, g.floats(`${p}.post_attention_layernorm.weight`, layer.ffnNorm, [d]));
    const gate = g.op('MatMul', [fNorm, g.floats(`${p}.mlp.gate_proj.weight`, layer.wGate, [d, spec.intermediateSize])]);
    const up = g.op('MatMul', [fNorm, g.floats(`${p}.mlp.up_proj.weight`, layer.wUp, [d, spec.intermediateSize])]);
    const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
    x = g.op('Add', [x, g.op('MatMul', [act, g.floats(`${p}.mlp.down_proj.weight`, layer.wDown, [spec.intermediateSize, d])])]);
  });

  const hidden = rmsNorm(x, g.floats('model.norm.weight', weights.finalNorm, [d]));
  const logits = addLmHead(g, spec, weights, embed, hidden, options.head);
  addDecoderOutputs(g, spec, logits, hidden, options.hiddenStatesOutput);
  return g.toModel({ model_type: spec.modelType });
}
