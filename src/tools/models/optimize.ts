/**
 * `models optimize`: a Hugging Face hub export of a Llama/Qwen2 decoder (the plain graph transformers'
 * exporter and optimum write) rebuilt as a model pack in this project's layout: its weights are read back
 * (hub-export-reader.ts) and the decoder is built again by `buildDecoderGraph`, fused (onnxruntime's
 * GroupQueryAttention and SkipSimplifiedLayerNormalization over a preallocated KV buffer) by
 * default, with the `hidden_states` output a router reads. float16 exports are widened to float32.
 *
 * The pack gets config.json (the export's, with the fields the builder defines rewritten), the export's
 * generation_config.json and tokenizer files when it has them, and pack-source.json. It is written
 * atomically: a refusal or a failed write leaves no folder behind, and an older pack at the output stays.
 *
 * @example
 * const r = await optimizeHubExport({ input: 'hub/qwen2.5-0.5b', output: 'models/qwen-fused' });
 * console.log(r.spec.numLayers, r.weightType, r.copied);
 */
import { existsSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { DEFAULT_MODEL_FILE, modelFiles } from '../../shared/model/model-pack.ts';
import { writeFolderAtomically } from './atomic-output.ts';
import { sha256File } from './convert-llama2c.ts';
import { buildDecoderGraph, type DecoderLayout } from './decoder-graph.ts';
import { decodeAttentionSource, type DecodeAttention } from './decoder-graph-attention.ts';
import { hfConfig, parameterCount, type DecoderSpec } from './decoder-spec.ts';
import { readHubExport } from './hub-export-reader.ts';
import type { WeightType } from './hub-export-tensors.ts';
import { writeModel } from './onnx-file.ts';
import { PACK_SOURCE_FILE } from './pack-writer.ts';

export interface OptimizeOptions {
  /** A hub folder (its model.onnx, or onnx/model.onnx) or one .onnx file of it. */
  input: string;
  /** The pack folder to write (new, empty, or with `force` one this project's tools wrote). */
  output: string;
  /** `fused` when omitted; `plain` rebuilds the standard-op graph (the reference the fused one is checked against). */
  layout?: DecoderLayout;
  /** Fused layout: how decode steps attend (DecoderGraphOptions); the default when omitted. */
  decodeAttention?: DecodeAttention;
  /** Replace a pack this project's tools wrote at `output` (output-ownership.ts). */
  force?: boolean;
}

export interface OptimizeResult {
  modelPath: string;
  spec: DecoderSpec;
  weightType: WeightType;
  layout: DecoderLayout;
  /** Files copied from the hub folder (generation config, tokenizer). */
  copied: string[];
}

/** What a hub folder may hold besides the model and config.json that a pack keeps as it is. */
export const HUB_METADATA_FILES = [
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'vocab.json',
  'merges.txt',
  'tokenizer.model',
  'chat_template.jinja',
  'chat_template.json',
];
/** Above this many bytes of weights a pack keeps them in `model.onnx_data` (protobuf's limit is 2 GB). */
const EXTERNAL_DATA_ABOVE_BYTES = 256 * 1024 * 1024;

/** A folder means its model.onnx, or onnx/model.onnx as hub repositories lay it out. */
export function resolveHubModel(input: string): string {
  if (!existsSync(input)) throw new AppError('NOT_FOUND', `${input}: no such file or folder`);
  if (!statSync(input).isDirectory()) return input;
  for (const candidate of [join(input, DEFAULT_MODEL_FILE), join(input, 'onnx', DEFAULT_MODEL_FILE)]) if (existsSync(candidate)) return candidate;
  const found = modelFiles(input);
  throw new AppError('NOT_FOUND', `${input}: no ${DEFAULT_MODEL_FILE} in this folder${found.length ? `; name one of ${found.join(', ')} as --in` : ''}`);
}

export async function optimizeHubExport(options: OptimizeOptions): Promise<OptimizeResult> {
  const layout = options.layout ?? 'fused';
  const modelPath = resolveHubModel(options.input);
  // The output folder is replaced whole: one that holds the export would lose it.
  if (existsSync(options.output) && realpathSync(modelPath).startsWith(`${realpathSync(options.output)}${sep}`)) {
    throw new AppError('INVALID_ARGUMENT', `--out ${options.output} holds the export being read; write the pack to a new folder`);
  }
  const { spec, weights, weightType, config, configPath } = readHubExport(modelPath);
  const packFolder = dirname(configPath);
  const copied = HUB_METADATA_FILES.filter((f) => existsSync(join(packFolder, f)));
  await writeFolderAtomically(options.output, { tool: 'models optimize', force: options.force }, (dir) => {
    const graph = buildDecoderGraph(spec, weights, {
      head: spec.tieEmbeddings ? 'gemm' : 'matmul',
      hiddenStatesOutput: true,
      layout,
      decodeAttention: options.decodeAttention,
    });
    writeModel(graph, join(dir, DEFAULT_MODEL_FILE), { externalData: parameterCount(spec) * 4 > EXTERNAL_DATA_ABOVE_BYTES });
    // The export's own fields stay (chat settings, token ids, ...); what the rebuilt graph is, the builder says.
    const kept = { ...config };
    delete kept.torch_dtype;
    delete kept.dtype;
    writeFileSync(join(dir, 'config.json'), json({ ...kept, ...hfConfig(spec) }));
    copyHubFiles(packFolder, dir, copied);
    if (!copied.includes('generation_config.json')) {
      writeFileSync(join(dir, 'generation_config.json'), json({ bos_token_id: spec.bosTokenId, eos_token_id: spec.eosTokenIds, do_sample: false }));
    }
    writeFileSync(
      join(dir, PACK_SOURCE_FILE),
      json({
        tool: 'optimize',
        model: resolve(modelPath),
        modelSha256: sha256File(modelPath),
        layout,
        ...decodeAttentionSource(layout, options.decodeAttention),
      }),
    );
  });
  return { modelPath, spec, weightType, layout, copied };
}

/** Copies `files` of a hub folder into a pack folder, naming the one that cannot be read. */
export function copyHubFiles(from: string, to: string, files: readonly string[]): void {
  // Read and written rather than copied, so the pack's files are writable even when the hub folder's are not.
  for (const f of files) writeFileSync(join(to, f), readHubFile(join(from, f)));
}

function readHubFile(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read (${errorMessage(e)})`);
  }
}

/** The summary `models optimize` prints. */
export function formatOptimizeResult(r: OptimizeResult, output: string): string {
  const s = r.spec;
  const lines = [
    `wrote ${output} (${r.layout} layout) from ${r.modelPath}`,
    `  ${s.modelType}: ${s.numLayers} layers, hidden ${s.hiddenSize}, ${s.numHeads} heads / ${s.numKvHeads} KV heads of ${s.headDim}, vocabulary ${s.vocabSize}${s.qkvBias ? ', q/k/v biases' : ''}${s.tieEmbeddings ? ', tied embedding' : ''}`,
  ];
  if (r.weightType === 'float16') lines.push('  float16 weights widened to float32 (the pack is fp32; `models quantize` makes q4/int8 from it)');
  if (r.copied.length) lines.push(`  copied ${r.copied.join(', ')}`);
  if (!r.copied.includes('tokenizer.json'))
    lines.push("  no tokenizer.json in the hub folder: copy the model's tokenizer.json and tokenizer_config.json into the pack");
  return lines.join('\n');
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
