/**
 * A Qwen2 decoder's weights as GGUF, named and laid out as llama.cpp's convert_hf_to_gguf.py writes a
 * converted Qwen2.5: matrices as rows of `in` values (ggml dims [in, out], the Hugging Face [out, in]
 * layout; our ONNX MatMul weights are [in, out], so they are transposed), 1-D tensors (norms, biases)
 * kept F32 as llama.cpp does, and the real Qwen tokenizer's tokens, types and merges (model gpt2, pre qwen2).
 */
import type { DecoderSpec, DecoderWeights } from '../models/decoder-spec.ts';
import { quantizeQ4_0, quantizeQ8_0 } from './gguf-quantize.ts';
import { type GgmlTypeName, type GgufTensor, type GgufValue, writeGguf } from './gguf-writer.ts';

/** llama.cpp's token types (llama_token_type). */
const TOKEN_NORMAL = 1;
const TOKEN_CONTROL = 3;
const TOKEN_USER_DEFINED = 4;

/** general.file_type (llama_ftype) for an all-one-type file. */
const FILE_TYPES: Record<GgmlTypeName, number> = { F32: 0, Q4_0: 2, Q8_0: 7 };

interface HfTokenizerJson {
  model: { vocab: Record<string, number>; merges: (string | [string, string])[] };
  added_tokens: { id: number; content: string; special: boolean }[];
}

/** Tokens, types and merges as the GGUF tokenizer keys want them; ids without a token become `[PADn]`. */
export function qwenVocabulary(tokenizerJson: unknown, vocabSize: number): { tokens: string[]; types: number[]; merges: string[] } {
  const json = tokenizerJson as HfTokenizerJson;
  const tokens = new Array<string | undefined>(vocabSize);
  const types = new Array<number>(vocabSize).fill(TOKEN_USER_DEFINED);
  for (const [text, id] of Object.entries(json.model.vocab)) {
    if (id < vocabSize) {
      tokens[id] = text;
      types[id] = TOKEN_NORMAL;
    }
  }
  for (const added of json.added_tokens) {
    if (added.id < vocabSize) {
      tokens[added.id] = added.content;
      types[added.id] = added.special ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
    }
  }
  return {
    tokens: Array.from(tokens, (t, id) => t ?? `[PAD${id}]`),
    types,
    merges: json.model.merges.map((m) => (typeof m === 'string' ? m : m.join(' '))),
  };
}

/** `[rows, cols]` row-major → `[cols, rows]` row-major. */
function transpose(m: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(m.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = m[r * cols + c]!;
  return out;
}

function encode(values: Float32Array, type: GgmlTypeName): Uint8Array {
  if (type === 'Q8_0') return quantizeQ8_0(values);
  if (type === 'Q4_0') return quantizeQ4_0(values);
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

/** The tensors of a Qwen2 GGUF: 2-D ones in `matrixType`, the rest F32. */
export function qwen2Tensors(spec: DecoderSpec, weights: DecoderWeights, matrixType: GgmlTypeName): GgufTensor[] {
  const { hiddenSize: d, intermediateSize: f, numHeads: h, numKvHeads: kv, headDim: hd, vocabSize: v } = spec;
  const vector = (name: string, values: Float32Array): GgufTensor => ({ name, dims: [values.length], type: 'F32', data: () => encode(values, 'F32') });
  // An ONNX [in, out] weight: ggml wants rows of `in` values, one per output.
  const matmul = (name: string, w: Float32Array, inputs: number, outputs: number): GgufTensor => ({
    name,
    dims: [inputs, outputs],
    type: matrixType,
    data: () => encode(transpose(w, inputs, outputs), matrixType),
  });
  const tensors: GgufTensor[] = [{ name: 'token_embd.weight', dims: [d, v], type: matrixType, data: () => encode(weights.embed, matrixType) }];
  weights.layers.forEach((l, i) => {
    const blk = `blk.${i}`;
    tensors.push(vector(`${blk}.attn_norm.weight`, l.attnNorm));
    tensors.push(matmul(`${blk}.attn_q.weight`, l.wq, d, h * hd));
    tensors.push(matmul(`${blk}.attn_k.weight`, l.wk, d, kv * hd));
    tensors.push(matmul(`${blk}.attn_v.weight`, l.wv, d, kv * hd));
    if (l.bq) tensors.push(vector(`${blk}.attn_q.bias`, l.bq));
    if (l.bk) tensors.push(vector(`${blk}.attn_k.bias`, l.bk));
    if (l.bv) tensors.push(vector(`${blk}.attn_v.bias`, l.bv));
    tensors.push(matmul(`${blk}.attn_output.weight`, l.wo, h * hd, d));
    tensors.push(vector(`${blk}.ffn_norm.weight`, l.ffnNorm));
    tensors.push(matmul(`${blk}.ffn_gate.weight`, l.wGate, d, f));
    tensors.push(matmul(`${blk}.ffn_up.weight`, l.wUp, d, f));
    tensors.push(matmul(`${blk}.ffn_down.weight`, l.wDown, f, d));
  });
  tensors.push(vector('output_norm.weight', weights.finalNorm));
  if (weights.lmHead) tensors.push(matmul('output.weight', weights.lmHead, d, v));
  return tensors;
}

/** The metadata llama.cpp's Qwen2 loader reads. */
export function qwen2Metadata(spec: DecoderSpec, name: string, matrixType: GgmlTypeName, tokenizerJson: unknown): Map<string, GgufValue> {
  const vocab = qwenVocabulary(tokenizerJson, spec.vocabSize);
  const u32 = (value: number): GgufValue => ({ type: 'uint32', value });
  const f32 = (value: number): GgufValue => ({ type: 'float32', value });
  return new Map<string, GgufValue>([
    ['general.architecture', { type: 'string', value: 'qwen2' }],
    ['general.name', { type: 'string', value: name }],
    ['general.file_type', u32(FILE_TYPES[matrixType])],
    ['general.quantization_version', u32(2)],
    ['qwen2.block_count', u32(spec.numLayers)],
    ['qwen2.context_length', u32(spec.maxPositions)],
    ['qwen2.embedding_length', u32(spec.hiddenSize)],
    ['qwen2.feed_forward_length', u32(spec.intermediateSize)],
    ['qwen2.attention.head_count', u32(spec.numHeads)],
    ['qwen2.attention.head_count_kv', u32(spec.numKvHeads)],
    ['qwen2.rope.freq_base', f32(spec.ropeTheta)],
    ['qwen2.attention.layer_norm_rms_epsilon', f32(spec.rmsNormEps)],
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: 'qwen2' }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: vocab.tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'int32', value: vocab.types }],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', value: vocab.merges }],
    ['tokenizer.ggml.eos_token_id', u32(spec.eosTokenIds[0]!)],
    ['tokenizer.ggml.padding_token_id', u32(spec.bosTokenId)],
    ['tokenizer.ggml.bos_token_id', u32(spec.bosTokenId)],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: false }],
  ]);
}

/**
 * Writes a Qwen2 decoder as a GGUF file llama.cpp loads like a converted Qwen2.5.
 * @example
 * writeQwen2Gguf('models/bench/qwen2.5-0.5b-q4_0.gguf', PRESETS['qwen2.5-0.5b']!, randomWeights(spec, 0), 'Q4_0', tokenizerJson);
 */
export function writeQwen2Gguf(path: string, spec: DecoderSpec, weights: DecoderWeights, matrixType: GgmlTypeName, tokenizerJson: unknown): void {
  if (spec.modelType !== 'qwen2') throw new Error(`GGUF conversion is written for qwen2, got ${spec.modelType}`);
  writeGguf(path, qwen2Metadata(spec, `random ${spec.modelType}`, matrixType, tokenizerJson), qwen2Tensors(spec, weights, matrixType));
}
