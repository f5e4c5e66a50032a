/** Builds the backend the config names, with the vocabulary and window of the model pack when known. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseExecutionProviders } from '../../shared/model/execution-providers.ts';
import type { Logger } from '../../shared/process/logger.ts';
import { readJsonFile } from '../../shared/model/model-pack.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { Backend } from './backend.ts';
import type { ShimConfig } from '../config.ts';
import { EmbeddedBackend } from './embedded-backend.ts';
import { OpenAiBackend } from './openai-backend.ts';
import { SglangBackend } from './sglang-backend.ts';

export async function createBackend(config: Readonly<ShimConfig>, tokenizer: TextTokenizer | undefined, log?: Logger): Promise<Backend> {
  if (config.backend === 'embedded') {
    return EmbeddedBackend.load({
      modelPack: config.modelPack!,
      modelFile: config.modelFile,
      threads: config.threads,
      executionProviders: parseExecutionProviders(config.executionProvider),
      thread: config.modelThread,
      log,
      maxLiveSequences: config.maxLiveSequences,
      prefixCacheBytes: config.prefixCacheMb * 2 ** 20,
      maxBatch: config.maxBatch,
      appendTokens: config.batchAppendTokens,
      tokenVocabSize: tokenizer?.vocabSize,
    });
  }
  const pack = packLimits(config.modelPack);
  const common = {
    baseUrl: config.backendUrl!,
    apiKey: config.backendApiKey,
    retries: config.backendRetries,
    stream: config.backendStream,
    vocabSize: config.vocabSize ?? pack.vocabSize ?? tokenizer?.vocabSize,
    maxContext: config.maxContext ?? pack.maxContext,
  };
  if (config.backend === 'sglang') return new SglangBackend(common);
  return new OpenAiBackend({ ...common, model: config.backendModel, retokenizer: config.openaiRetokenize ? tokenizer : undefined });
}

/** `vocab_size` and `max_position_embeddings` of a pack's config.json, when there is one. */
function packLimits(dir: string | undefined): { vocabSize?: number; maxContext?: number } {
  if (!dir || !existsSync(join(dir, 'config.json'))) return {};
  const config = readJsonFile(join(dir, 'config.json')) as Record<string, unknown>;
  const int = (v: unknown) => (Number.isInteger(v) && (v as number) > 0 ? (v as number) : undefined);
  return { vocabSize: int(config.vocab_size), maxContext: int(config.max_position_embeddings) };
}
