/**
 * A model pack is a folder in the layout ONNX model hubs use: `model.onnx` (+ `model.onnx_data`),
 * `config.json`, `generation_config.json`, `tokenizer.json`, `tokenizer_config.json`. A hub folder often
 * holds several variants of the same model (`model_fp16.onnx`, `model_q4.onnx`, `model_quantized.onnx`,
 * each with its own `*.onnx_data` when large); `file` names the one to run, `model.onnx` by default.
 *
 * @example
 * const pack = loadModelPack('qwen2.5-0.5b', 'model_q4.onnx');
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { AppError, errorMessage } from '../errors.ts';

export interface ModelPack {
  dir: string;
  modelPath: string;
  /** `config.json` fields the runtime needs. */
  modelType: string;
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  hiddenSize: number;
  vocabSize: number;
  maxPositions: number;
  bosTokenId: number | undefined;
  eosTokenIds: number[];
}

export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read (${errorMessage(e)})`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', `${path}: not valid JSON (${errorMessage(e)})`);
  }
}

function ids(value: unknown): number[] {
  if (value === undefined || value === null) return [];
  return (Array.isArray(value) ? value : [value]).filter((v): v is number => Number.isInteger(v));
}

/** The file a pack runs when none is named. */
export const DEFAULT_MODEL_FILE = 'model.onnx';

/** The `.onnx` files of a pack folder, for messages that say which variants exist. */
export function modelFiles(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith('.onnx'))
      .sort();
  } catch {
    return [];
  }
}

export function loadModelPack(dir: string, file: string = DEFAULT_MODEL_FILE): ModelPack {
  const root = resolve(dir);
  if (basename(file) !== file || !file.endsWith('.onnx')) {
    throw new AppError('INVALID_ARGUMENT', `model file must be a .onnx file name inside the pack folder (e.g. model_q4.onnx), got ${JSON.stringify(file)}`);
  }
  const modelPath = join(root, file);
  if (!existsSync(modelPath)) {
    const found = modelFiles(root);
    throw new AppError('NOT_FOUND', `${root}: not a model pack (no ${file}${found.length ? `; it has ${found.join(', ')}` : ''})`);
  }
  const configPath = join(root, 'config.json');
  const config = readJsonFile(configPath) as Record<string, unknown>;
  const num = (key: string, fallback?: number): number => {
    const v = config[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      throw new AppError('INVALID_ARGUMENT', `${configPath}: ${key} must be a positive integer, got ${JSON.stringify(v)}`);
    }
    return v;
  };
  const hiddenSize = num('hidden_size');
  const numHeads = num('num_attention_heads');
  const generationPath = join(root, 'generation_config.json');
  const generation = existsSync(generationPath) ? (readJsonFile(generationPath) as Record<string, unknown>) : {};
  const eos = ids(generation.eos_token_id ?? config.eos_token_id);
  const bos = ids(generation.bos_token_id ?? config.bos_token_id)[0];
  return {
    dir: root,
    modelPath,
    modelType: String(config.model_type ?? 'unknown'),
    numLayers: num('num_hidden_layers'),
    numKvHeads: num('num_key_value_heads', numHeads),
    headDim: num('head_dim', hiddenSize / numHeads),
    hiddenSize,
    vocabSize: num('vocab_size'),
    maxPositions: num('max_position_embeddings'),
    bosTokenId: bos,
    eosTokenIds: eos,
  };
}
