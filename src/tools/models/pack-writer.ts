/**
 * Writes a decoder model pack (model.onnx [+ model.onnx_data], config.json, generation_config.json,
 * tokenizer.json, tokenizer_config.json, chat_template.jinja where there is one, pack-source.json)
 * atomically into `outDir`.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFolderAtomically } from './atomic-output.ts';
import type { OutputClaim } from './output-ownership.ts';
import { buildDecoderGraph, type DecoderGraphOptions } from './decoder-graph.ts';
import { hfConfig, type DecoderSpec, type DecoderWeights } from './decoder-spec.ts';
import { writeModel } from './onnx-file.ts';

export interface DecoderPackContents {
  spec: DecoderSpec;
  weights: DecoderWeights;
  graph: DecoderGraphOptions;
  tokenizerJson: unknown;
  tokenizerConfig: unknown;
  /** The chat template's Jinja text (chat_template.jinja, where transformers writes it); none when undefined. */
  chatTemplate?: string;
  /** Keep weights in `model.onnx_data` (required above protobuf's 2 GB limit). */
  externalData: boolean;
  /** Where the pack came from; `demo` compares it to decide whether a rebuild is needed. */
  source: Record<string, unknown>;
}

export const PACK_SOURCE_FILE = 'pack-source.json';

/**
 * Whether `dir` holds a pack (its `modelFile` present) built from exactly `source`: tools that build
 * packs on demand (demo, benchmarks) leave such a pack alone.
 */
export function packIsUpToDate(dir: string, source: Record<string, unknown>, modelFile = 'model.onnx'): boolean {
  const file = join(dir, PACK_SOURCE_FILE);
  if (!existsSync(file) || !existsSync(join(dir, modelFile))) return false;
  try {
    return JSON.stringify(JSON.parse(readFileSync(file, 'utf8'))) === JSON.stringify(source);
  } catch {
    return false;
  }
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export async function writeDecoderPack(outDir: string, contents: DecoderPackContents, claim: OutputClaim = { tool: 'models' }): Promise<void> {
  const { spec } = contents;
  await writeFolderAtomically(outDir, claim, (dir) => {
    writeModel(buildDecoderGraph(spec, contents.weights, contents.graph), join(dir, 'model.onnx'), {
      externalData: contents.externalData,
    });
    writeFileSync(join(dir, 'config.json'), json(hfConfig(spec)));
    writeFileSync(
      join(dir, 'generation_config.json'),
      json({
        bos_token_id: spec.bosTokenId,
        eos_token_id: spec.eosTokenIds.length === 1 ? spec.eosTokenIds[0] : spec.eosTokenIds,
        do_sample: false,
      }),
    );
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(contents.tokenizerJson));
    writeFileSync(join(dir, 'tokenizer_config.json'), json(contents.tokenizerConfig));
    if (contents.chatTemplate !== undefined) writeFileSync(join(dir, 'chat_template.jinja'), contents.chatTemplate);
    writeFileSync(join(dir, PACK_SOURCE_FILE), json(contents.source));
  });
}
