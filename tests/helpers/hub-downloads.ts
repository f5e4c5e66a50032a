/**
 * Hub downloads laid out the way a Hugging Face repository keeps them, from the real exports in
 * ../shared/assets/models/hf-exports (or a folder edited from them, edited-hub-exports.ts): config.json,
 * generation_config.json, tokenizer.json and tokenizer_config.json at the top and the ONNX files in
 * `onnx/`. The exports come without a tokenizer, so the project's (tok512.bin through the llama2.c
 * converter) stands in, as the hub's would.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEMO } from '../../src/shared/paths.ts';
import { convertLlama2cTokenizer } from '../../src/tools/models/llama2c-tokenizer.ts';
import { readModel, writeModel } from '../../src/tools/models/onnx-file.ts';
import { HF_EXPORTS } from './hub-export-packs.ts';

export interface HubDownload {
  /** The folder with the ONNX files, config.json and (when it has one) generation_config.json. */
  from: string;
  /** ONNX files to take from it; all four variants when omitted. */
  files?: readonly string[];
  /** Put the ONNX files at the top instead of in onnx/ (a pack-like folder). */
  topLevel?: boolean;
  /** Written as chat_template.jinja. */
  chatTemplate?: string;
  /** ONNX files written with their weights in `<file>_data` beside them, as the hub keeps large models. */
  externalData?: readonly string[];
  /** Top-level files to leave out (config.json, tokenizer.json, ...). */
  without?: readonly string[];
}

export const ALL_VARIANTS = ['model.onnx', 'model_fp16.onnx', 'model_q4.onnx', 'model_quantized.onnx'] as const;

/** stories260K's tokenizer files as the project converts them (512 tokens, <s> = 1). */
function tokenizerFiles(): Record<string, string> {
  const { tokenizerJson, tokenizerConfig } = convertLlama2cTokenizer(readFileSync(DEMO.tokenizer), 512);
  return { 'tokenizer.json': JSON.stringify(tokenizerJson), 'tokenizer_config.json': JSON.stringify(tokenizerConfig) };
}

/** `root/name` laid out as a hub repository; returns the folder. */
export function layOutHubDownload(root: string, name: string, download: HubDownload): string {
  const dir = join(root, name);
  const onnxDir = download.topLevel ? dir : join(dir, 'onnx');
  mkdirSync(onnxDir, { recursive: true });
  for (const f of download.files ?? ALL_VARIANTS) {
    if (download.externalData?.includes(f)) writeModel(readModel(join(download.from, f)), join(onnxDir, f), { externalData: true });
    else copyFileSync(join(download.from, f), join(onnxDir, f));
  }
  const top: Record<string, string | Buffer> = { ...tokenizerFiles(), 'config.json': readFileSync(join(download.from, 'config.json')) };
  if (existsSync(join(download.from, 'generation_config.json'))) top['generation_config.json'] = readFileSync(join(download.from, 'generation_config.json'));
  if (download.chatTemplate !== undefined) top['chat_template.jinja'] = download.chatTemplate;
  for (const [f, content] of Object.entries(top)) if (!download.without?.includes(f)) writeFileSync(join(dir, f), content);
  return dir;
}

/** The shared export folder of `name` (stories260k-hf, stories260k-3l-hf). */
export const hubExport = (name: string) => join(HF_EXPORTS, name);
