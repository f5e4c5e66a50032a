/**
 * A Hugging Face `config.json` (+ `generation_config.json`) of a Llama or Qwen2 model read into the
 * builder's `DecoderSpec`. Only what the project's decoder graph computes is accepted: SiLU feed-forward,
 * the default rotary embedding (no scaling, no sliding window), biases only where the builder has them.
 * Whether the q/k/v projections carry biases and whether the LM head is tied are read from the graph
 * afterwards (hub-export-reader.ts); the values set here are what the config claims.
 *
 * Both spellings of the rotary base are read: `rope_theta` (transformers 4) and
 * `rope_parameters.rope_theta` (transformers 5).
 *
 * @example
 * const spec = specFromHubConfig(readJsonFile('hub/config.json'), {}, 'hub/config.json');
 * spec.numLayers; // 5 for stories260k-hf
 */
import { AppError } from '../../shared/errors.ts';
import type { DecoderSpec } from './decoder-spec.ts';

type Json = Record<string, unknown>;

const ARCHITECTURES: Record<string, DecoderSpec['modelType']> = { LlamaForCausalLM: 'llama', Qwen2ForCausalLM: 'qwen2' };

function refuse(where: string, what: string): never {
  throw new AppError('INVALID_ARGUMENT', `${where}: ${what}`);
}

function modelType(config: Json, where: string): DecoderSpec['modelType'] {
  const declared = config.model_type;
  if (declared === 'llama' || declared === 'qwen2') return declared;
  const architecture = Array.isArray(config.architectures) ? config.architectures[0] : undefined;
  if (declared === undefined && typeof architecture === 'string' && ARCHITECTURES[architecture]) return ARCHITECTURES[architecture];
  return refuse(
    where,
    `model_type ${JSON.stringify(declared ?? architecture ?? null)} is not one this tool rewrites (expected llama or qwen2: ${Object.keys(ARCHITECTURES).join(', ')})`,
  );
}

/** The rotary base, refusing any rotary scaling (llama3, yarn, dynamic, ...) the builder does not compute. */
function ropeTheta(config: Json, where: string): number {
  const parameters = (config.rope_parameters ?? undefined) as Json | undefined;
  const scaling = (config.rope_scaling ?? undefined) as Json | undefined;
  for (const [key, value] of [
    ['rope_parameters', parameters],
    ['rope_scaling', scaling],
  ] as const) {
    const ropeType = value?.rope_type ?? value?.type ?? 'default';
    if (ropeType !== 'default') refuse(where, `${key}.rope_type is ${JSON.stringify(ropeType)}: only the default rotary embedding is rewritten`);
  }
  const theta = parameters?.rope_theta ?? config.rope_theta ?? 10000;
  if (typeof theta !== 'number' || !(theta > 0)) refuse(where, `rope_theta must be a positive number, got ${JSON.stringify(theta)}`);
  return theta;
}

function tokenIds(value: unknown): number[] {
  if (value === undefined || value === null) return [];
  return (Array.isArray(value) ? value : [value]).filter((v): v is number => Number.isInteger(v));
}

export function specFromHubConfig(config: Json, generation: Json, where: string): DecoderSpec {
  const type = modelType(config, where);
  const int = (key: string, fallback?: number): number => {
    const v = config[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) refuse(where, `${key} must be a positive integer, got ${JSON.stringify(v ?? null)}`);
    return v;
  };
  const activation = config.hidden_act ?? 'silu';
  if (activation !== 'silu') refuse(where, `hidden_act ${JSON.stringify(activation)}: the decoder graph computes SiLU (silu) only`);
  if (config.mlp_bias === true) refuse(where, 'mlp_bias is true: the decoder graph has no feed-forward biases');
  if (type === 'llama' && config.attention_bias === true)
    refuse(where, 'attention_bias is true: Llama then has an o_proj bias too, which the decoder graph does not have');
  if (config.use_sliding_window === true) refuse(where, 'use_sliding_window is true: the decoder graph attends to the whole context');
  const hiddenSize = int('hidden_size');
  const numHeads = int('num_attention_heads');
  const bos = tokenIds(generation.bos_token_id ?? config.bos_token_id)[0];
  const eos = tokenIds(generation.eos_token_id ?? config.eos_token_id);
  if (bos === undefined) refuse(where, 'no bos_token_id (in config.json or generation_config.json)');
  if (eos.length === 0) refuse(where, 'no eos_token_id (in config.json or generation_config.json)');
  const eps = config.rms_norm_eps ?? 1e-6;
  if (typeof eps !== 'number' || !(eps > 0)) refuse(where, `rms_norm_eps must be a positive number, got ${JSON.stringify(eps)}`);
  return {
    modelType: type,
    vocabSize: int('vocab_size'),
    hiddenSize,
    intermediateSize: int('intermediate_size'),
    numLayers: int('num_hidden_layers'),
    numHeads,
    numKvHeads: int('num_key_value_heads', numHeads),
    headDim: int('head_dim', hiddenSize / numHeads),
    ropeTheta: ropeTheta(config, where),
    rmsNormEps: eps,
    maxPositions: int('max_position_embeddings'),
    qkvBias: type === 'qwen2' || config.attention_bias === true,
    tieEmbeddings: config.tie_word_embeddings !== false,
    bosTokenId: bos,
    eosTokenIds: eos,
  };
}
