/**
 * Temporary packs made from the real Hugging Face exports in ../shared/assets/models/hf-exports the way a
 * user would bring one: the hub folder's config files, the project's tokenizer (from tok512.bin by the
 * llama2.c converter), and every variant with `hidden_states` exposed by the project's own tool.
 */
import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ASSETS_DIR, DEMO } from '../../src/shared/paths.ts';
import { convertLlama2c } from '../../src/tools/models/convert-llama2c.ts';
import { exposeHiddenStates } from '../../src/tools/models/expose-hidden.ts';

export const HF_EXPORTS = join(ASSETS_DIR, 'models', 'hf-exports');
/** The four files of each hub folder. */
export const VARIANTS = ['model.onnx', 'model_fp16.onnx', 'model_quantized.onnx', 'model_q4.onnx'] as const;
export type Variant = (typeof VARIANTS)[number];

export interface HubExportPacks {
  root: string;
  /** stories260k-3l-hf (the first 3 layers) and stories260k-hf (all 5) as packs holding all four variants. */
  edge: string;
  cloud: string;
  /** The project's own conversions of the same checkpoint: 3 and 5 layers. */
  converted3: string;
  converted5: string;
}

async function hubPack(root: string, folder: string, name: string, tokenizerFrom: string): Promise<string> {
  const dir = join(root, name);
  mkdirSync(dir);
  // The hub folder has no tokenizer: the one the project's converter wrote is copied in.
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(tokenizerFrom, file), join(dir, file));
  for (const file of ['config.json', 'generation_config.json']) copyFileSync(join(HF_EXPORTS, folder, file), join(dir, file));
  for (const variant of VARIANTS) await exposeHiddenStates({ input: join(HF_EXPORTS, folder, variant), output: dir });
  return dir;
}

export async function makeHubExportPacks(): Promise<HubExportPacks> {
  const root = mkdtempSync(join(tmpdir(), 'hub-exports-'));
  const converted3 = join(root, 'converted-3l');
  const converted5 = join(root, 'converted-5l');
  await convertLlama2c({ checkpoint: DEMO.checkpoint, tokenizer: DEMO.tokenizer, layers: 3, out: converted3 });
  await convertLlama2c({ checkpoint: DEMO.checkpoint, tokenizer: DEMO.tokenizer, out: converted5 });
  return {
    root,
    edge: await hubPack(root, 'stories260k-3l-hf', 'edge-hf', converted3),
    cloud: await hubPack(root, 'stories260k-hf', 'cloud-hf', converted5),
    converted3,
    converted5,
  };
}
