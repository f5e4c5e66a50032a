/**
 * A decoder as the lab's tools load it (router training, `router eval`, `eval`): both models of a pair in
 * one process, run in turn, mostly one-token passes (rollouts, horizon branches, generations). A pass of a
 * model as small as stories260K is over before onnxruntime's second intra-op thread has anything to share,
 * yet that thread spins for work after every run, on a core the other model is waiting for. So a model this
 * small runs on one thread, which gives the same figures in less CPU time and no more wall-clock time
 * (docs/router-training.md, "Training time"); a larger one keeps onnxruntime's default, which splits its
 * matrix products across cores.
 *
 * @example
 * const edgeModel = await loadLabModel(loadModelPack('models/stories260k-distilled-1l')); // one thread
 */
import { DecoderModel } from '../../shared/model/decoder-model.ts';
import type { ModelPack } from '../../shared/model/model-pack.ts';

/**
 * Multiply-adds per token below which a pass runs on one thread. stories260K's pair (about 0.3 million) is
 * well under it; a 64-wide model with Qwen2's 151,936-token vocabulary (about 10 million, nearly all of it
 * the logits' product) is well over: a product that size is worth splitting across cores.
 */
export const ONE_THREAD_BELOW_MULTIPLY_ADDS = 2_000_000;

/**
 * A rough count of one token's multiply-adds, from the pack's config: per layer the attention's four
 * projections (4·h²) and a feed-forward block four times as wide (8·h²), then the logits (h·vocabulary).
 */
export function multiplyAddsPerToken(pack: Pick<ModelPack, 'numLayers' | 'hiddenSize' | 'vocabSize'>): number {
  return pack.numLayers * 12 * pack.hiddenSize ** 2 + pack.hiddenSize * pack.vocabSize;
}

/** Intra-op threads for a lab session: 1 for a small model, onnxruntime's choice (undefined) otherwise. */
export function labThreads(pack: Pick<ModelPack, 'numLayers' | 'hiddenSize' | 'vocabSize'>): number | undefined {
  return multiplyAddsPerToken(pack) < ONE_THREAD_BELOW_MULTIPLY_ADDS ? 1 : undefined;
}

export function loadLabModel(pack: ModelPack): Promise<DecoderModel> {
  return DecoderModel.load(pack, { threads: labThreads(pack) });
}
