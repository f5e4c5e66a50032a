/**
 * The decoder in onnxruntime's fused LLM layout (what its generate-API model builder emits), for
 * fewer kernels per decode step and no KV copies:
 * - `GroupQueryAttention` (com.microsoft) with the rotary embedding inside (`do_rotary=1`, half-split
 *   rotation as in Hugging Face exports: `rotary_interleaved=0`, cos/sin tables as initializers);
 * - `SimplifiedLayerNormalization` for the first RMSNorm and `SkipSimplifiedLayerNormalization` for
 *   every later one, which adds the residual in the same kernel.
 *
 * Inputs: `input_ids`, `seqlens_k` (int32 `[batch]`: tokens in the cache after this run, minus one),
 * `total_sequence_length` (int32 scalar) and `past_key_values.{i}.key|value`. When the caller passes
 * one preallocated `[batch, kv_heads, capacity, head_dim]` buffer as both `past_key_values.{i}.*` and
 * `present.{i}.*`, onnxruntime's CPU kernel sees the same pointer and writes only the new positions.
 */
import type { ModelProto } from 'onnx-buf';
import type { DecoderSpec, DecoderWeights } from './decoder-spec.ts';
import type { DecoderGraphOptions } from './decoder-graph.ts';
import { addDecoderOutputs, addLmHead } from './decoder-graph-head.ts';
import { AppError } from '../../shared/errors.ts';
import { DataType, FloatAttr, GraphBuilder } from '../../shared/onnx-graph.ts';

/** cos and sin of position × frequency, `[maxPositions, headDim / 2]`, computed in float32 as the plain graph does. */
export function rotaryTables(spec: DecoderSpec): { cos: Float32Array; sin: Float32Array } {
  const half = spec.headDim / 2;
  const cos = new Float32Array(spec.maxPositions * half);
  const sin = new Float32Array(spec.maxPositions * half);
  for (let j = 0; j < half; j++) {
    const invFreq = Math.fround(spec.ropeTheta ** (-(2 * j) / spec.headDim));
    for (let p = 0; p < spec.maxPositions; p++) {
      const angle = Math.fround(p * invFreq);
      cos[p * half + j] = Math.cos(angle);
      sin[p * half + j] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** onnxruntime's CPU GroupQueryAttention refuses other head sizes at run time ("head_size shall be a multiple of 16"). */
export const GQA_HEAD_DIM_MULTIPLE = 16;

export function buildFusedDecoderGraph(spec: DecoderSpec, weights: DecoderWeights, options: DecoderGraphOptions): ModelProto {
  const { hiddenSize: d, numHeads: h, numKvHeads: kv, headDim: hd, vocabSize: vocab } = spec;
  if (hd % GQA_HEAD_DIM_MULTIPLE !== 0) {
    throw new AppError('INVALID_ARGUMENT', `the fused layout needs a head_dim that is a multiple of ${GQA_HEAD_DIM_MULTIPLE} (onnxruntime's CPU GroupQueryAttention), got ${hd}; use --layout plain`);
  }
  const g = new GraphBuilder(`${spec.modelType}-decoder-fused`);
  const inputIds = g.input('input_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const seqlensK = g.input('seqlens_k', DataType.INT32, ['batch_size']);
  const totalLength = g.input('total_sequence_length', DataType.INT32, []);
  const past = weights.layers.map((_, i) => ({
    key: g.input(`past_key_values.${i}.key`, DataType.FLOAT, ['batch_size', kv, 'past_sequence_length', hd]),
    value: g.input(`past_key_values.${i}.value`, DataType.FLOAT, ['batch_size', kv, 'past_sequence_length', hd]),
  }));
  const embed = g.floats('model.embed_tokens.weight', weights.embed, [vocab, d]);
  const tables = rotaryTables(spec);
  const cos = g.floats('const.cos_cache', tables.cos, [spec.maxPositions, hd / 2]);
  const sin = g.floats('const.sin_cache', tables.sin, [spec.maxPositions, hd / 2]);
  const epsilon = new FloatAttr(spec.rmsNormEps);
  // SkipSimplifiedLayerNormalization(x, residual): [norm(x + residual), -, -, x + residual].
  const skipNorm = (x: string, residual: string, weight: string): [string, string] => {
    const [normed, , , sum] = g.contribOps('SkipSimplifiedLayerNormalization', [x, residual, weight], { epsilon }, [`${weight}/normed`, '', '', `${weight}/residual`]);
    return [normed!, sum!];
  };

  let residual = g.op('Gather', [embed, inputIds]);
  let normed = g.op('SimplifiedLayerNormalization', [residual, g.floats('model.layers.0.input_layernorm.weight', weights.layers[0]!.attnNorm, [d])], { axis: -1, epsilon, stash_type: 1 });
  let pending: string | undefined;
  weights.layers.forEach((layer, i) => {
    const p = `model.layers.${i}`;
    if (pending !== undefined) [normed, residual] = skipNorm(pending, residual, g.floats(`${p}.input_layernorm.weight`, layer.attnNorm, [d]));
    const project = (input: string, w: Float32Array, b: Float32Array | undefined, name: string, rows: number, out: number) => {
      const y = g.op('MatMul', [input, g.floats(`${p}.${name}.weight`, w, [rows, out])]);
      return b ? g.op('Add', [y, g.floats(`${p}.${name}.bias`, b, [out])]) : y;
    };
    const q = project(normed, layer.wq, layer.bq, 'self_attn.q_proj', d, h * hd);
    const k = project(normed, layer.wk, layer.bk, 'self_attn.k_proj', d, kv * hd);
    const v = project(normed, layer.wv, layer.bv, 'self_attn.v_proj', d, kv * hd);
    const [attn] = g.contribOps(
      'GroupQueryAttention',
      [q, k, v, past[i]!.key, past[i]!.value, seqlensK, totalLength, cos, sin],
      { num_heads: h, kv_num_heads: kv, do_rotary: 1, rotary_interleaved: 0 },
      [`${p}.self_attn/output`, `present.${i}.key`, `present.${i}.value`],
    );
    const attnOut = project(attn!, layer.wo, undefined, 'self_attn.o_proj', h * hd, d);
    const [ffnIn, sum] = skipNorm(attnOut, residual, g.floats(`${p}.post_attention_layernorm.weight`, layer.ffnNorm, [d]));
    residual = sum;
    const gate = project(ffnIn, layer.wGate, undefined, 'mlp.gate_proj', d, spec.intermediateSize);
    const up = project(ffnIn, layer.wUp, undefined, 'mlp.up_proj', d, spec.intermediateSize);
    const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
    pending = project(act, layer.wDown, undefined, 'mlp.down_proj', spec.intermediateSize, d);
  });
  const [hidden] = skipNorm(pending!, residual, g.floats('model.norm.weight', weights.finalNorm, [d]));
  const logits = addLmHead(g, spec, weights, embed, hidden, options.head);
  addDecoderOutputs(g, spec, logits, hidden, options.hiddenStatesOutput, 'present_sequence_length');
  return g.toModel({ model_type: spec.modelType, decoder_layout: 'fused' });
}
