/**
 * The one place an edge engine's parts are loaded: the edge model pack (its ONNX variant and thread
 * count), its tokenizer and the router, with every check that they fit together done here, before the
 * first generation: a trained router needs the edge model's hidden states, of the hidden size it was
 * trained on, a router that reads the proposed token needs the vocabulary its token table was built
 * over, and a router pack is refused on any edge model but the one it was trained for (edge-model-identity.ts).
 * A refusal releases whatever was loaded. The server, the benches and the evaluation assemble
 * their engines from it: `{ ...parts, cloud, ...settings }`.
 *
 * @example
 * const parts = await loadEdgeEngine({ edgeModel: 'models/stories260k-3l', router: 'models/router-stories260k-3l' });
 * try {
 *   for await (const event of generate({ ...parts, cloud }, request)) console.log(event);
 * } finally {
 *   await parts.release();
 * }
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { ModelProtoSchema } from 'onnx-buf';
import { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/process/logger.ts';
import { loadModelPack, type ModelPack } from '../../shared/model/model-pack.ts';
import type { ModelThread } from '../../shared/model/model-session.ts';
import { DecodeScheduler } from '../../shared/model/scheduler/decode-scheduler.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { loadRouter, type Router } from '../routing/router.ts';
import { readsToken } from '../routing/router-features.ts';
import { checkRouterTrainedFor } from '../routing/edge-model-identity.ts';

export interface EdgeEngineSources {
  /** The edge model pack's folder, or a pack the caller loaded (and checked) itself. */
  edgeModel: string | ModelPack;
  /** The pack's ONNX file when `edgeModel` is a folder (hub folders hold several variants); `model.onnx` when omitted. */
  edgeModelFile?: string;
  /** onnxruntime's intra-op threads for the edge model; its own default when omitted or 0. */
  threads?: number;
  /** onnxruntime's execution providers for the edge model, in order of preference; `cpu` when omitted. */
  executionProviders?: readonly string[];
  /** Where the edge model's forward passes run (DecoderLoadOptions.thread); the main thread when omitted. */
  thread?: ModelThread;
  /** Where a provider's start-up fallback is reported. */
  log?: Logger;
  /**
   * A router pack's folder; the built-in top-1 scorer when omitted; or a router the caller built (a
   * benchmark's synthetic one), which is checked like a loaded one and released with the parts.
   */
  /** Most sequences in one batched decode step (the engine's scheduler, decode-scheduler.ts); 1 or omitted runs each step alone. */
  maxBatch?: number;
  router?: string | Router;
  /** Aborts loading (a stop signal during start-up): what was loaded is released and the reason thrown. */
  signal?: AbortSignal;
}

/** What `loadEdgeEngine` loaded: the fields of an `EdgeEngine` it owns, and their release. */
export interface LoadedEdgeEngine {
  edgeModel: DecoderModel;
  /** The generations' appends on `edgeModel`, in shared passes; absent without `maxBatch` above 1 (or where the export cannot batch). */
  scheduler?: DecodeScheduler;
  tokenizer: TextTokenizer;
  router: Router;
  /** Releases the router and the edge model (each once; later calls do nothing). */
  release(): Promise<void>;
}

/** Loads and checks the edge's parts (see the header); throws INVALID_ARGUMENT when they do not fit. */
export async function loadEdgeEngine(sources: EdgeEngineSources): Promise<LoadedEdgeEngine> {
  const { signal, router: given } = sources;
  // A router the caller built is ours from here on: released on failure too.
  let router: Router | undefined = typeof given === 'object' ? given : undefined;
  let edgeModel: DecoderModel | undefined;
  try {
    signal?.throwIfAborted();
    const pack = typeof sources.edgeModel === 'string' ? loadModelPack(sources.edgeModel, sources.edgeModelFile) : sources.edgeModel;
    const tokenizer = await TextTokenizer.fromPack(pack.dir);
    const { executionProviders, thread, log } = sources;
    edgeModel = await DecoderModel.load(pack, { threads: sources.threads || undefined, executionProviders, thread, log });
    const scheduler = sources.maxBatch ? DecodeScheduler.over(edgeModel, { maxBatch: sources.maxBatch }, sources.log) : undefined;
    router = typeof given === 'object' ? given : await loadRouter(given);
    checkRouterFits(router, typeof given === 'string' ? given : undefined, pack, edgeModel.hasHiddenStates);
    signal?.throwIfAborted();
    const parts = { edgeModel, scheduler, tokenizer, router };
    let released: Promise<void> | undefined;
    return { ...parts, release: () => (released ??= releaseParts(parts.router, parts.edgeModel)) };
  } catch (e) {
    await releaseParts(router, edgeModel);
    throw e;
  }
}

async function releaseParts(router: Router | undefined, edgeModel: DecoderModel | undefined): Promise<void> {
  await Promise.all([router?.release(), edgeModel?.release()]);
}

/** The router (loaded from `dir` when it has one) against the edge pack; throws when they were not made for each other. */
function checkRouterFits(router: Router, dir: string | undefined, pack: ModelPack, hasHiddenStates: boolean): void {
  const { hiddenSize, features } = router.info;
  if (hiddenSize === null) return;
  const shown = dir ?? router.info.name;
  // First: a router trained for another model is the cause of any other misfit, and the message should say so.
  if (dir !== undefined) checkRouterTrainedFor(dir, pack);
  if (!hasHiddenStates) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `router ${shown} reads the edge model's hidden states; ${pack.modelPath} has no hidden_states output (add it with: bun run models expose-hidden)`,
    );
  }
  if (hiddenSize !== pack.hiddenSize) {
    throw new AppError('INVALID_ARGUMENT', `router ${shown} expects hidden size ${hiddenSize}; ${pack.dir} has ${pack.hiddenSize}`);
  }
  if (dir !== undefined && features && readsToken(features)) {
    const vocabulary = tokenVocabularyOf(dir);
    if (vocabulary !== null && vocabulary !== pack.vocabSize) {
      throw new AppError(
        'INVALID_ARGUMENT',
        `router ${shown} reads the proposed token over a vocabulary of ${vocabulary} ids; ${pack.dir} has ${pack.vocabSize} (router trained for another model?)`,
      );
    }
  }
}

/**
 * The vocabulary a router pack's token table was built over: router.onnx's `token_vocab_size` constant
 * (router-pack.ts clamps ids to it), or null when `dir` is no router pack or its graph has none.
 */
function tokenVocabularyOf(dir: string): number | null {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(join(dir, 'router.onnx'));
  } catch {
    return null;
  }
  const constant = fromBinary(ModelProtoSchema, bytes).graph?.initializer.find((t) => t.name === 'token_vocab_size');
  if (!constant) return null;
  const value =
    constant.int64Data[0] ??
    (constant.rawData.length >= 8 ? new DataView(constant.rawData.buffer, constant.rawData.byteOffset, 8).getBigInt64(0, true) : undefined);
  return value === undefined ? null : Number(value);
}
