/**
 * What both decoder layouts end with: the LM head on the final-norm output, and the graph outputs
 * `logits`, `present.{i}.key|value` and (for routing) `hidden_states`.
 *
 * @example
 * const logits = addLmHead(g, spec, weights, embed, hidden, 'gemm');
 * addDecoderOutputs(g, spec, logits, hidden, true, 'total_sequence_length');
 */
import type { DecoderSpec, DecoderWeights } from './decoder-spec.ts';
import { DataType, FloatAttr, type GraphBuilder } from '../../shared/model/onnx-graph.ts';

/**
 * `matmul` multiplies by a `[hidden, vocab]` matrix; `gemm` uses `Gemm(transB=1)` directly on the
 * `[vocab, hidden]` embedding, so a tied head stores its weights once. Returns the `logits` value.
 *
 * The head runs on the last `num_logits_to_keep` positions only (an int64 scalar input, as in Hugging
 * Face's `logits_to_keep`; 0 keeps them all): a prefill needs one row of logits, and the head over a
 * 151,936-token vocabulary takes as many multiply-adds per position as nine of Qwen2.5-0.5B's 24 layers.
 */
export function addLmHead(g: GraphBuilder, spec: DecoderSpec, weights: DecoderWeights, embed: string, allHidden: string, head: 'matmul' | 'gemm'): string {
  const { hiddenSize: d, vocabSize: vocab } = spec;
  const keep = g.input('num_logits_to_keep', DataType.INT64, []);
  // Slice from -keep to the end of the positions: -0 = 0 keeps every position.
  const start = g.op('Neg', [g.op('Unsqueeze', [keep, g.ints('const.keep_axes', [0])])]);
  const hidden = g.op('Slice', [allHidden, start, g.ints('const.keep_end', [2 ** 53 - 1]), g.ints('const.keep_axis', [1])]);
  if (head === 'gemm') {
    if (!spec.tieEmbeddings) throw new Error('the gemm head is written for tied embeddings');
    const flat = g.op('Reshape', [hidden, g.ints('const.shape_flat', [-1, d])]);
    const rows = g.op('Gemm', [flat, embed], { transB: 1, alpha: new FloatAttr(1), beta: new FloatAttr(1) });
    const outShape = g.op('Concat', [g.op('Shape', [hidden], { start: 0, end: 2 }), g.ints('const.vocab', [vocab])], { axis: 0 });
    return g.op('Reshape', [rows, outShape], {}, ['logits']);
  }
  const matrix = weights.lmHead ?? transpose(weights.embed, vocab, d);
  return g.op('MatMul', [hidden, g.floats('lm_head.weight', matrix, [d, vocab])], {}, ['logits']);
}

/** Declares the outputs; the `present.*` values must already be named so. `cacheLength` names their axis 2, `cacheHeadDim` is their axis 3. */
export function addDecoderOutputs(
  g: GraphBuilder,
  spec: DecoderSpec,
  logits: string,
  hidden: string,
  hiddenStatesOutput: boolean,
  cacheLength = 'total_sequence_length',
  cacheHeadDim = spec.headDim,
): void {
  const { hiddenSize: d, numKvHeads: kv, vocabSize: vocab } = spec;
  const hd = cacheHeadDim;
  g.output(logits, 'logits', DataType.FLOAT, ['batch_size', 'sequence_length', vocab]);
  for (let i = 0; i < spec.numLayers; i++) {
    for (const kind of ['key', 'value'] as const) {
      g.output(`present.${i}.${kind}`, `present.${i}.${kind}`, DataType.FLOAT, ['batch_size', kv, cacheLength, hd]);
    }
  }
  if (hiddenStatesOutput) g.output(hidden, 'hidden_states', DataType.FLOAT, ['batch_size', 'sequence_length', d]);
}

/** The outputs besides the cache: `logits` and, when asked, `hidden_states`. */
export function addLogitsOutputs(g: GraphBuilder, spec: DecoderSpec, logits: string, hidden: string, hiddenStatesOutput: boolean): void {
  g.output(logits, 'logits', DataType.FLOAT, ['batch_size', 'sequence_length', spec.vocabSize]);
  if (hiddenStatesOutput) g.output(hidden, 'hidden_states', DataType.FLOAT, ['batch_size', 'sequence_length', spec.hiddenSize]);
}

/** `[rows, cols]` → `[cols, rows]`. */
export function transpose(m: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(m.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = m[r * cols + c]!;
  return out;
}
