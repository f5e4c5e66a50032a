/**
 * The decoder in onnxruntime's fused LLM layout (what its generate-API model builder emits), for
 * fewer kernels per decode step and no KV copies:
 * - `GroupQueryAttention` (com.microsoft) with the rotary embedding inside (`do_rotary=1`, half-split
 *   rotation as in Hugging Face exports: `rotary_interleaved=0`, cos/sin tables as initializers);
 * - `SimplifiedLayerNormalization` for the first RMSNorm and `SkipSimplifiedLayerNormalization` for
 *   every later one, which adds the residual in the same kernel;
 * - q, k and v as one matrix product (GroupQueryAttention's packed input), gate and up as another: per
 *   layer four matrix products instead of seven, so fewer kernels per step (and, quantized, fewer MatMulNBits).
 *
 * onnxruntime's CPU GroupQueryAttention only runs head sizes that are multiples of 16, so smaller heads
 * (the 8-wide heads of stories260K) are zero-padded to the next multiple: exact, since zero dimensions add
 * nothing to q·k or to the output, with the rotary halves kept as halves and the scores scaled by the
 * model's own head size. The KV cache then holds the padded size (the `past_key_values.*` declarations say it).
 *
 * Inputs: `input_ids`, `seqlens_k` (int32 `[batch]`: tokens in the cache after this run, minus one),
 * `total_sequence_length` (int32 scalar) and `past_key_values.{i}.key|value`. When the caller passes
 * one preallocated `[batch, kv_heads, capacity, head_dim]` buffer as both `past_key_values.{i}.*` and
 * `present.{i}.*`, onnxruntime's CPU kernel sees the same pointer and writes only the new positions.
 *
 * Outputs also `new_key_values.{i}.key|value`: only the positions this run added, `[batch, kv_heads,
 * sequence_length, head_dim]`, rotary applied, gathered from `present.*` at each row's last
 * sequence_length positions. A caller that fetches these instead of `present.*` copies them into its own
 * buffer itself. Why: onnxruntime-node copies every fetched output into new JavaScript memory after the
 * run, a preallocated present buffer included, so fetching `present.*` costs a copy of the whole cache
 * into fresh pages each step; an unfetched present lives in onnxruntime's arena, whose memory is reused
 * (what that saves a step: docs/model-packs.md, "Decoder layouts").
 */
import type { ModelProto } from 'onnx-buf';
import type { DecoderSpec, DecoderWeights } from './decoder-spec.ts';
import type { DecoderGraphOptions } from './decoder-graph-options.ts';
import { addDecoderOutputs, addLmHead, addLogitsOutputs } from './decoder-graph-head.ts';
import { DEFAULT_DECODE_ATTENTION, decodeStepAttention, decodeStepSwitch } from './decoder-graph-attention.ts';
import { AppError } from '../../shared/errors.ts';
import { DataType, FloatAttr, GraphBuilder } from '../../shared/model/onnx-graph.ts';

/** onnxruntime's CPU GroupQueryAttention refuses other head sizes at run time ("head_size shall be a multiple of 16"). */
export const GQA_HEAD_DIM_MULTIPLE = 16;

/** The head size the fused graph computes with: `headDim`, or the next multiple of 16 with zero padding. */
export function paddedHeadDim(headDim: number): number {
  return Math.ceil(headDim / GQA_HEAD_DIM_MULTIPLE) * GQA_HEAD_DIM_MULTIPLE;
}

/**
 * Where a head's dimension `c` goes in a padded head of `padded` dimensions. The two rotary halves stay
 * halves: `[0, hd/2)` at the start, `[hd/2, hd)` at `padded/2`, so GroupQueryAttention's half-split
 * rotation pairs the same dimensions as the model's; the padding dimensions stay zero in q, k and v.
 */
function paddedColumn(c: number, headDim: number, padded: number): number {
  const half = headDim / 2;
  return c < half ? c : padded / 2 + (c - half);
}

/** `[rows, heads * headDim]` → `[rows, heads * padded]`, each head's columns placed by paddedColumn, zeros elsewhere. */
export function padHeadColumns(w: Float32Array, rows: number, heads: number, headDim: number, padded: number): Float32Array {
  if (padded === headDim) return w;
  const out = new Float32Array(rows * heads * padded);
  for (let r = 0; r < rows; r++) {
    for (let h = 0; h < heads; h++) {
      for (let c = 0; c < headDim; c++) out[r * heads * padded + h * padded + paddedColumn(c, headDim, padded)] = w[r * heads * headDim + h * headDim + c]!;
    }
  }
  return out;
}

/** `[heads * headDim, cols]` → `[heads * padded, cols]`: the output projection reads the padded attention output. */
function padHeadRows(w: Float32Array, cols: number, heads: number, headDim: number, padded: number): Float32Array {
  if (padded === headDim) return w;
  const out = new Float32Array(heads * padded * cols);
  for (let h = 0; h < heads; h++) {
    for (let c = 0; c < headDim; c++)
      out.set(w.subarray((h * headDim + c) * cols, (h * headDim + c + 1) * cols), (h * padded + paddedColumn(c, headDim, padded)) * cols);
  }
  return out;
}

/** Column-wise concatenation of `[rows, n_i]` matrices. */
function concatColumns(rows: number, parts: readonly { m: Float32Array; cols: number }[]): Float32Array {
  const total = parts.reduce((sum, p) => sum + p.cols, 0);
  const out = new Float32Array(rows * total);
  for (let r = 0; r < rows; r++) {
    let at = r * total;
    for (const { m, cols } of parts) {
      out.set(m.subarray(r * cols, (r + 1) * cols), at);
      at += cols;
    }
  }
  return out;
}

/** cos and sin of position × frequency, `[maxPositions, padded / 2]`, computed in float32 as the plain graph does; padding pairs rotate by 0. */
export function rotaryTables(spec: DecoderSpec, padded = spec.headDim): { cos: Float32Array; sin: Float32Array } {
  const half = padded / 2;
  const cos = new Float32Array(spec.maxPositions * half).fill(1);
  const sin = new Float32Array(spec.maxPositions * half);
  for (let j = 0; j < spec.headDim / 2; j++) {
    const invFreq = Math.fround(spec.ropeTheta ** (-(2 * j) / spec.headDim));
    for (let p = 0; p < spec.maxPositions; p++) {
      const angle = Math.fround(p * invFreq);
      cos[p * half + j] = Math.cos(angle);
      sin[p * half + j] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

export function buildFusedDecoderGraph(spec: DecoderSpec, weights: DecoderWeights, options: DecoderGraphOptions): ModelProto {
  const { hiddenSize: d, numHeads: h, numKvHeads: kv, headDim: hd, vocabSize: vocab, intermediateSize: ffn } = spec;
  const hdp = paddedHeadDim(hd);
  const g = new GraphBuilder(`${spec.modelType}-decoder-fused`);
  const inputIds = g.input('input_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const seqlensK = g.input('seqlens_k', DataType.INT32, ['batch_size']);
  const totalLength = g.input('total_sequence_length', DataType.INT32, []);
  const past = weights.layers.map((_, i) => ({
    key: g.input(`past_key_values.${i}.key`, DataType.FLOAT, ['batch_size', kv, 'past_sequence_length', hdp]),
    value: g.input(`past_key_values.${i}.value`, DataType.FLOAT, ['batch_size', kv, 'past_sequence_length', hdp]),
  }));
  const embed = g.floats('model.embed_tokens.weight', weights.embed, [vocab, d]);
  const tables = rotaryTables(spec, hdp);
  const cos = g.floats('const.cos_cache', tables.cos, [spec.maxPositions, hdp / 2]);
  const sin = g.floats('const.sin_cache', tables.sin, [spec.maxPositions, hdp / 2]);
  const epsilon = new FloatAttr(spec.rmsNormEps);
  // Padding must not change the softmax temperature: the scores are scaled by the model's own head size.
  const scale = new FloatAttr(1 / Math.sqrt(hd));
  // Decode steps may attend with standard ops on the buffer in place (decoder-graph-attention.ts).
  const decodeAttention = options.decodeAttention ?? DEFAULT_DECODE_ATTENTION;
  if (decodeAttention === 'matmul' && options.newKeyValuesOutputs === false)
    throw new AppError('INVALID_ARGUMENT', 'decode attention matmul returns the new positions only (new_key_values.*): it has no present.* to share');
  const attentionShape = { numHeads: h, numKvHeads: kv, headDim: hdp, scale: scale.value };
  const switched = decodeAttention === 'gqa' ? undefined : decodeStepSwitch(g, attentionShape, { inputIds, seqlensK, pastKey: past[0]!.key, cos, sin });
  const newPositions = options.newKeyValuesOutputs === false ? undefined : newPositionsIndex(g, kv, hdp, inputIds, seqlensK);
  const [outputDims, newDims] = [
    ['batch_size', 'sequence_length', h * hdp],
    ['batch_size', kv, 'sequence_length', hdp],
  ];
  // SkipSimplifiedLayerNormalization(x, residual): [norm(x + residual), -, -, x + residual].
  const skipNorm = (x: string, residual: string, weight: string): [string, string] => {
    const [normed, , , sum] = g.contribOps('SkipSimplifiedLayerNormalization', [x, residual, weight], { epsilon }, [
      `${weight}/normed`,
      '',
      '',
      `${weight}/residual`,
    ]);
    return [normed!, sum!];
  };

  let residual = g.op('Gather', [embed, inputIds]);
  let normed = g.op('SimplifiedLayerNormalization', [residual, g.floats('model.layers.0.input_layernorm.weight', weights.layers[0]!.attnNorm, [d])], {
    axis: -1,
    epsilon,
    stash_type: 1,
  });
  let pending: string | undefined;
  weights.layers.forEach((layer, i) => {
    const p = `model.layers.${i}`;
    if (pending !== undefined) [normed, residual] = skipNorm(pending, residual, g.floats(`${p}.input_layernorm.weight`, layer.attnNorm, [d]));
    // q, k and v in one matrix product (GroupQueryAttention takes them packed), each head padded to hdp.
    const qkvColumns = [
      { m: padHeadColumns(layer.wq, d, h, hd, hdp), cols: h * hdp },
      { m: padHeadColumns(layer.wk, d, kv, hd, hdp), cols: kv * hdp },
      { m: padHeadColumns(layer.wv, d, kv, hd, hdp), cols: kv * hdp },
    ];
    const qkvWidth = (h + 2 * kv) * hdp;
    let qkv = g.op('MatMul', [normed, g.floats(`${p}.self_attn.qkv_proj.weight`, concatColumns(d, qkvColumns), [d, qkvWidth])]);
    if (layer.bq && layer.bk && layer.bv) {
      const bias = concatColumns(1, [
        { m: padHeadColumns(layer.bq, 1, h, hd, hdp), cols: h * hdp },
        { m: padHeadColumns(layer.bk, 1, kv, hd, hdp), cols: kv * hdp },
        { m: padHeadColumns(layer.bv, 1, kv, hd, hdp), cols: kv * hdp },
      ]);
      qkv = g.op('Add', [qkv, g.floats(`${p}.self_attn.qkv_proj.bias`, bias, [qkvWidth])]);
    }
    const gqa = (b: GraphBuilder, names?: string[]) =>
      b.contribOps(
        'GroupQueryAttention',
        [qkv, '', '', past[i]!.key, past[i]!.value, seqlensK, totalLength, cos, sin],
        { num_heads: h, kv_num_heads: kv, do_rotary: 1, rotary_interleaved: 0, scale },
        names ?? 3,
      ) as [string, string, string];
    let attn: string;
    if (switched) {
      const newNames = (['key', 'value'] as const).map((kind) => `new_key_values.${i}.${kind}`);
      [attn] = g.ops(
        'If',
        [switched.isDecodeStep],
        {
          then_branch: g.subgraph(`${p}.self_attn/decode_step`, (b) => {
            const r = decodeStepAttention(b, switched.inputs, qkv, past[i]!, `${p}.self_attn`);
            b.output(r.output, r.output, DataType.FLOAT, outputDims);
            for (const value of [r.newKey, r.newValue]) b.output(value, value, DataType.FLOAT, newDims);
          }),
          else_branch: g.subgraph(`${p}.self_attn/gqa`, (b) => {
            const [output, presentKey, presentValue] = gqa(b);
            b.output(output, output, DataType.FLOAT, outputDims);
            for (const present of [presentKey, presentValue]) {
              const added = b.op('GatherElements', [present, newPositions!], { axis: 2 });
              b.output(added, added, DataType.FLOAT, newDims);
            }
          }),
        },
        [`${p}.self_attn/output`, ...newNames],
      ) as [string];
      for (const name of newNames) g.output(name, name, DataType.FLOAT, newDims);
    } else {
      [attn] = gqa(g, [`${p}.self_attn/output`, `present.${i}.key`, `present.${i}.value`]);
    }
    const attnOut = g.op('MatMul', [attn, g.floats(`${p}.self_attn.o_proj.weight`, padHeadRows(layer.wo, d, h, hd, hdp), [h * hdp, d])]);
    const [ffnIn, sum] = skipNorm(attnOut, residual, g.floats(`${p}.post_attention_layernorm.weight`, layer.ffnNorm, [d]));
    residual = sum;
    // gate and up in one matrix product, split after it.
    const gateUpWeight = concatColumns(d, [
      { m: layer.wGate, cols: ffn },
      { m: layer.wUp, cols: ffn },
    ]);
    const gateUp = g.op('MatMul', [ffnIn, g.floats(`${p}.mlp.gate_up_proj.weight`, gateUpWeight, [d, 2 * ffn])]);
    const [gate, up] = g.ops('Split', [gateUp], { axis: -1 }, 2);
    const act = g.op('Mul', [g.op('Mul', [gate!, g.op('Sigmoid', [gate!])]), up!]);
    pending = g.op('MatMul', [act, g.floats(`${p}.mlp.down_proj.weight`, layer.wDown, [ffn, d])]);
  });
  const [hidden] = skipNorm(pending!, residual, g.floats('model.norm.weight', weights.finalNorm, [d]));
  const logits = addLmHead(g, spec, weights, embed, hidden, options.head);
  if (switched) {
    addLogitsOutputs(g, spec, logits, hidden, options.hiddenStatesOutput);
  } else {
    addDecoderOutputs(g, spec, logits, hidden, options.hiddenStatesOutput, 'present_sequence_length', hdp);
    if (newPositions) {
      for (let i = 0; i < spec.numLayers; i++) {
        for (const kind of ['key', 'value'] as const) {
          g.output(g.op('GatherElements', [`present.${i}.${kind}`, newPositions], { axis: 2 }), `new_key_values.${i}.${kind}`, DataType.FLOAT, newDims);
        }
      }
    }
  }
  return g.toModel({ model_type: spec.modelType, decoder_layout: 'fused' });
}

/**
 * Where `new_key_values.{i}.*` come from in `present.{i}.*`: each row's positions `[seqlens_k + 1 −
 * sequence_length, seqlens_k]`, as a GatherElements index `[batch, kv_heads, sequence_length, head_dim]`
 * along axis 2, computed once for every layer.
 */
function newPositionsIndex(g: GraphBuilder, kv: number, hdp: number, inputIds: string, seqlensK: string): string {
  const newLength = g.op('Shape', [inputIds], { start: 1, end: 2 });
  const zero = g.ints('const.new_kv.zero', [0], []);
  const one = g.ints('const.new_kv.one', [1], []);
  // First new position per row: seqlens_k + 1 − sequence_length, as [batch, 1].
  const first = g.op('Sub', [g.op('Add', [g.op('Cast', [seqlensK], { to: DataType.INT64 }), one]), newLength]);
  const positions = g.op('Add', [g.op('Unsqueeze', [first, g.ints('const.new_kv.axis_1', [1])]), g.op('Range', [zero, g.op('Squeeze', [newLength]), one])]);
  const batch = g.op('Shape', [inputIds], { start: 0, end: 1 });
  const indexShape = g.op('Concat', [batch, g.ints('const.new_kv.heads', [kv]), newLength, g.ints('const.new_kv.head_dim', [hdp])], { axis: 0 });
  return g.op('Expand', [g.op('Unsqueeze', [positions, g.ints('const.new_kv.axes_1_3', [1, 3])]), indexShape]);
}
