/**
 * `models prepare`: a Hugging Face hub download as it comes (hub-folder.ts: its `onnx/` folder, config,
 * generation config, tokenizer files and chat template) made into a pack in one command.
 *
 * The edge pack is built in the fastest layout the export allows (prepare-layouts.ts): a decoder
 * `models optimize` knows is rebuilt in the fused layout, quantized with `dtype`, because a hub export
 * as it comes (the plain layout) decodes behind llama.cpp where the fused layout is at parity
 * (docs/results.md); any other export keeps its files, with hidden_states exposed in each. With
 * `cloudOnly` it is the shim's pack for an HTTP backend (SGLang, OpenAI-compatible): the server runs the
 * model, and the shim reads only config.json (vocabulary, context length) and the tokenizer files, so no
 * ONNX file is copied.
 *
 * Config, generation config, tokenizer files and chat template come along (the tokenizer reads a
 * chat_template.jinja beside its config, as transformers does); every ONNX file of the result is checked to load
 * as a pack, and so is its tokenizer. Written atomically: a refusal or failure leaves no folder behind,
 * and an older pack at the output stays.
 *
 * @example
 * const r = await preparePack({ input: 'downloads/Qwen2.5-0.5B-Instruct', output: 'models/qwen', dtype: 'q4' });
 * console.log(formatPrepareResult(r));
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { basename, join, resolve, sep } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, modelFiles } from '../../shared/model/model-pack.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { writeFolderAtomically } from './atomic-output.ts';
import { readHubFolder, type HubFolder } from './hub-folder.ts';
import { copyHubFiles } from './optimize.ts';
import { PACK_SOURCE_FILE } from './pack-writer.ts';
import { buildFused, buildPlain, type FusedBuild, type LeftOut, type PlainBuild } from './prepare-layouts.ts';
import type { QuantizedDtype } from './quantize.ts';

export interface PrepareOptions {
  /** The hub folder: config and tokenizer files at the top, ONNX files in onnx/ or at the top. */
  input: string;
  /** The pack folder to write: new, empty, or (with `force`) one this project's tools wrote (output-ownership.ts). */
  output: string;
  /** Quantize the fused pack (or, where the export stays plain, run the hub's file of that type). */
  dtype?: QuantizedDtype;
  /** The shim's pack for an HTTP backend: config and tokenizer files, no ONNX. */
  cloudOnly?: boolean;
  force?: boolean;
}

export interface CloudOnlyBuild {
  layout: 'cloud-only';
  leftOut: LeftOut[];
}

export type PrepareResult = (FusedBuild | PlainBuild | CloudOnlyBuild) & {
  hub: string;
  output: string;
  /** Files copied from the hub folder as they are (config.json first). */
  copied: string[];
  /** A chat_template.jinja was written into the pack's tokenizer_config.json. */
  /** config.json's vocab_size and the tokenizer's own count. */
  vocabSize: unknown;
  tokenizerVocabSize: number;
};

export async function preparePack(options: PrepareOptions): Promise<PrepareResult> {
  if (options.cloudOnly && options.dtype) throw new AppError('INVALID_ARGUMENT', '--dtype applies to an edge pack; --cloud-only copies no ONNX file');
  const hub = await readHubFolder(options.input, { needOnnx: !options.cloudOnly });
  refuseOutputOverHub(options.output, hub);
  let built: FusedBuild | PlainBuild | CloudOnlyBuild | undefined;
  const copied = ['config.json', ...hub.metadata];
  await writeFolderAtomically(options.output, { tool: 'models prepare', force: options.force }, async (dir) => {
    if (options.cloudOnly) {
      copyHubFiles(hub.dir, dir, copied);
      built = { layout: 'cloud-only', leftOut: hub.onnxFiles.map((file) => ({ file, reason: 'the HTTP backend runs the model' })) };
    } else {
      const fused = await buildFused(hub, dir, options.dtype);
      if (!('layout' in fused)) copyHubFiles(hub.dir, dir, copied);
      built = 'layout' in fused ? fused : await buildPlain(hub, dir, options.dtype, fused.whyNotFused);
    }
    await checkPack(dir);
    writeFileSync(join(dir, PACK_SOURCE_FILE), `${JSON.stringify(packSource(dir, hub, built, options.dtype), null, 2)}\n`);
  });
  return { ...built!, hub: hub.dir, output: options.output, copied, vocabSize: hub.config.vocab_size, tokenizerVocabSize: hub.tokenizer.vocabSize };
}

/** The output folder is replaced whole (with --force): one that is, or holds, the folder being read would lose it. */
function refuseOutputOverHub(output: string, hub: HubFolder): void {
  const out = existsSync(output) ? realpathSync(output) : resolve(output);
  const read = [hub.dir, ...(hub.onnxDir ? [hub.onnxDir] : [])].map((p) => realpathSync(p));
  if (read.some((p) => p === out || p.startsWith(`${out}${sep}`))) {
    throw new AppError('INVALID_ARGUMENT', `--out ${output} holds the hub folder being read; write the pack to a new folder`);
  }
}

/** Every ONNX file loads as a pack (config.json's fields) and the tokenizer loads, as the edge will load them. */
async function checkPack(dir: string): Promise<void> {
  for (const file of modelFiles(dir)) loadModelPack(dir, file);
  await TextTokenizer.fromPack(dir);
}

/** pack-source.json: the hub folder and the choice made, over what optimize and quantize recorded. */
function packSource(dir: string, hub: HubFolder, built: FusedBuild | PlainBuild | CloudOnlyBuild, dtype: QuantizedDtype | undefined): Record<string, unknown> {
  const source = { tool: 'prepare', hub: hub.dir, layout: built.layout };
  if (built.layout === 'fused') return { ...source, ...(dtype ? { dtype } : {}), from: JSON.parse(readFileSync(join(dir, PACK_SOURCE_FILE), 'utf8')) };
  if (built.layout === 'plain') return { ...source, files: built.exposed.map((e) => basename(e.output)) };
  return source;
}
