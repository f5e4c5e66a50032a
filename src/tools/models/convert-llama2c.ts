/** `models convert-llama2c`: a llama2.c checkpoint + vocabulary → a decoder model pack. */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { readLlama2cCheckpoint } from './llama2c-checkpoint.ts';
import { convertLlama2cTokenizer } from './llama2c-tokenizer.ts';
import type { DecoderLayout } from './decoder-graph.ts';
import { decodeAttentionSource, type DecodeAttention } from './decoder-graph-attention.ts';
import { writeDecoderPack } from './pack-writer.ts';

export interface ConvertLlama2cOptions {
  checkpoint: string;
  tokenizer: string;
  /** Keep only the first K layers (then the final norm and the classifier): a weaker edge model. */
  layers?: number;
  out: string;
  /** The graph's layout (decoder-graph.ts); `plain` when omitted. */
  layout?: DecoderLayout;
  /** Fused layout: how decode steps attend (DecoderGraphOptions); the default when omitted. */
  decodeAttention?: DecodeAttention;
  /** Replace a pack this project's tools wrote at `out` (output-ownership.ts). */
  force?: boolean;
  /** A Jinja chat template file, written into the pack as chat_template.jinja (llama2.c checkpoints carry none). */
  chatTemplate?: string;
}

/** Bump when the converter's output changes, so `demo` rebuilds packs made by older code. */
export const CONVERTER_VERSION = 3;

export function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

export function llama2cSource(options: ConvertLlama2cOptions): Record<string, unknown> {
  return {
    tool: 'convert-llama2c',
    converterVersion: CONVERTER_VERSION,
    checkpointSha256: sha256File(options.checkpoint),
    tokenizerSha256: sha256File(options.tokenizer),
    layers: options.layers ?? null,
    // Recorded only when not the default, so packs built before the option existed stay up to date.
    ...(options.layout && options.layout !== 'plain' ? { layout: options.layout } : {}),
    ...decodeAttentionSource(options.layout, options.decodeAttention),
    ...(options.chatTemplate === undefined ? {} : { chatTemplateSha256: sha256File(options.chatTemplate) }),
  };
}

function readChatTemplate(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read chat template (${errorMessage(e)})`);
  }
}

export async function convertLlama2c(options: ConvertLlama2cOptions): Promise<void> {
  const chatTemplate = options.chatTemplate === undefined ? undefined : readChatTemplate(options.chatTemplate);
  const { spec, weights } = readLlama2cCheckpoint(options.checkpoint, options.layers);
  let vocabBytes: Uint8Array;
  try {
    vocabBytes = readFileSync(options.tokenizer);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${options.tokenizer}: cannot read tokenizer (${errorMessage(e)})`);
  }
  let tokenizer: ReturnType<typeof convertLlama2cTokenizer>;
  try {
    tokenizer = convertLlama2cTokenizer(vocabBytes, spec.maxPositions);
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', `${options.tokenizer}: ${errorMessage(e)}`);
  }
  if (tokenizer.vocabSize !== spec.vocabSize) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${options.tokenizer}: ${tokenizer.vocabSize} tokens, but ${options.checkpoint} has a vocabulary of ${spec.vocabSize}`,
    );
  }
  await writeDecoderPack(
    options.out,
    {
      spec,
      weights,
      graph: {
        head: spec.tieEmbeddings ? 'gemm' : 'matmul',
        hiddenStatesOutput: true,
        layout: options.layout ?? 'plain',
        decodeAttention: options.decodeAttention,
      },
      tokenizerJson: tokenizer.tokenizerJson,
      tokenizerConfig: tokenizer.tokenizerConfig,
      externalData: false,
      chatTemplate,
      source: llama2cSource(options),
    },
    { tool: 'models convert-llama2c', force: options.force },
  );
}
