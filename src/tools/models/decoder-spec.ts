/**
 * The architecture and weights of a Llama/Qwen2-style decoder: RMSNorm, rotary position embedding
 * (half-split rotation, as in Hugging Face exports), grouped-query attention, SwiGLU feed-forward.
 * Matrices are stored `[in, out]` row-major, the layout ONNX `MatMul(x, W)` wants.
 */
export interface DecoderSpec {
  modelType: 'llama' | 'qwen2';
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  ropeTheta: number;
  rmsNormEps: number;
  maxPositions: number;
  /** Qwen2 has biases on the q, k and v projections; Llama has none. */
  qkvBias: boolean;
  /** The LM head reuses the token embedding. */
  tieEmbeddings: boolean;
  bosTokenId: number;
  eosTokenIds: number[];
}

export interface LayerWeights {
  attnNorm: Float32Array;
  wq: Float32Array;
  wk: Float32Array;
  wv: Float32Array;
  wo: Float32Array;
  bq?: Float32Array;
  bk?: Float32Array;
  bv?: Float32Array;
  ffnNorm: Float32Array;
  wGate: Float32Array;
  wUp: Float32Array;
  wDown: Float32Array;
}

export interface DecoderWeights {
  /** `[vocab, hidden]` */
  embed: Float32Array;
  layers: LayerWeights[];
  finalNorm: Float32Array;
  /** `[hidden, vocab]`; absent when the embedding is tied. */
  lmHead?: Float32Array;
}

export function checkSpec(spec: DecoderSpec): void {
  const positive = ['vocabSize', 'hiddenSize', 'intermediateSize', 'numLayers', 'numHeads', 'numKvHeads', 'headDim'] as const;
  for (const key of positive) {
    if (!Number.isInteger(spec[key]) || spec[key] <= 0) throw new Error(`${key} must be a positive integer, got ${spec[key]}`);
  }
  if (spec.numHeads % spec.numKvHeads !== 0) {
    throw new Error(`numHeads (${spec.numHeads}) must be a multiple of numKvHeads (${spec.numKvHeads})`);
  }
  if (spec.headDim % 2 !== 0) throw new Error(`headDim must be even for rotary embedding, got ${spec.headDim}`);
}

/** Number of parameters the spec implies (the tied head counted once). */
export function parameterCount(spec: DecoderSpec): number {
  const { hiddenSize: d, intermediateSize: f, numHeads: h, numKvHeads: kv, headDim: hd, vocabSize: v } = spec;
  const attention = d * h * hd * 2 + d * kv * hd * 2 + (spec.qkvBias ? h * hd + 2 * kv * hd : 0);
  const perLayer = attention + 3 * d * f + 2 * d;
  return v * d + spec.numLayers * perLayer + d + (spec.tieEmbeddings ? 0 : d * v);
}

/** The Hugging Face `config.json` for a spec. */
export function hfConfig(spec: DecoderSpec): Record<string, unknown> {
  return {
    architectures: [spec.modelType === 'qwen2' ? 'Qwen2ForCausalLM' : 'LlamaForCausalLM'],
    model_type: spec.modelType,
    vocab_size: spec.vocabSize,
    hidden_size: spec.hiddenSize,
    intermediate_size: spec.intermediateSize,
    num_hidden_layers: spec.numLayers,
    num_attention_heads: spec.numHeads,
    num_key_value_heads: spec.numKvHeads,
    head_dim: spec.headDim,
    hidden_act: 'silu',
    rope_theta: spec.ropeTheta,
    rms_norm_eps: spec.rmsNormEps,
    max_position_embeddings: spec.maxPositions,
    tie_word_embeddings: spec.tieEmbeddings,
    attention_bias: spec.qkvBias,
    bos_token_id: spec.bosTokenId,
    eos_token_id: spec.eosTokenIds.length === 1 ? spec.eosTokenIds[0] : spec.eosTokenIds,
    torch_dtype: 'float32',
  };
}
