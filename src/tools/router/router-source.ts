/**
 * The source a trained router pack records (pack-source.json): hashes of both models and the text, and
 * every option that changes what training produces. `models demo` retrains when it differs.
 *
 * @example
 * const source = await routerSource(options); // { tool: 'router-train', trainerVersion, slmSha256, ... }
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { loadModelPack, type ModelPack } from '../../shared/model/model-pack.ts';
import { readTextCorpus } from '../lab/text-corpus.ts';
import { DEFAULT_MEMBERS, DEFAULT_ROLLOUT_WEIGHT, DEFAULT_ROUTER_LEARNING_RATE, TRAINER_VERSION, type TrainRouterOptions } from './train-router-options.ts';

async function fileSha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** A pack's weights: model.onnx and, for large packs, model.onnx_data. */
async function packSha256(pack: ModelPack): Promise<string> {
  const data = `${pack.modelPath}_data`;
  const parts = [await fileSha256(pack.modelPath), existsSync(data) ? await fileSha256(data) : ''];
  return createHash('sha256').update(parts.join(':')).digest('hex');
}

/** Everything the trained pack depends on; `models demo` retrains when it differs from pack-source.json. */
export async function routerSource(o: TrainRouterOptions): Promise<Record<string, unknown>> {
  const rolloutWeight = o.rolloutWeight ?? DEFAULT_ROLLOUT_WEIGHT;
  return {
    tool: 'router-train',
    trainerVersion: TRAINER_VERSION,
    slmSha256: await packSha256(loadModelPack(o.edgeModel, o.edgeModelFile)),
    // A shim's model has no file here to hash: its address stands for it.
    ...(o.cloud ? { cloud: o.cloud.address } : { llmSha256: await packSha256(loadModelPack(o.cloudModel!, o.cloudModelFile)) }),
    textSha256: readTextCorpus(o.text).sha256,
    // Only when named: the pack's own template is hashed nowhere else, so a router trained on it keeps its source.
    ...(o.chatTemplate !== undefined && existsSync(o.chatTemplate) ? { chatTemplateSha256: await fileSha256(o.chatTemplate) } : {}),
    trainFraction: o.trainFraction,
    seed: o.seed,
    maxEpochs: o.maxEpochs,
    hiddenUnits: o.hiddenUnits,
    members: o.members ?? DEFAULT_MEMBERS,
    learningRate: o.learningRate ?? DEFAULT_ROUTER_LEARNING_RATE,
    // Only when given, so routers trained with the default keep the source they were recorded with.
    ...(o.defaultThreshold === undefined ? {} : { defaultThreshold: o.defaultThreshold }),
    labels: o.labels,
    // Only when not divergence (the rule before the option, and the default until cloud-nll), so routers
    // trained with it, the demo routers among them, keep the source they were recorded with. trainRouter
    // passes the rule in force (its default depends on the dataset's kind).
    ...(o.rolloutLabels === undefined || o.rolloutLabels === 'divergence' ? {} : { rolloutLabels: o.rolloutLabels }),
    features: o.features,
    rounds: o.rounds,
    rolloutPrompts: o.rolloutPrompts,
    rolloutTokens: o.rolloutTokens,
    // Only when not 1 (the weight before the option), so routers trained with it, the demo routers among
    // them, keep the source they were recorded with.
    ...(rolloutWeight === 1 ? {} : { rolloutWeight }),
  };
}
