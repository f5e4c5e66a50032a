/**
 * `router eval`: the routing curve of a router pack on the held-out part of a text (the paragraphs after
 * the first `trainFraction`, which training never sees), by teacher forcing both models: the cloud in
 * process, or a running shim (`cloud`) for a pair whose cloud model only runs there. A chat dataset is
 * read as training reads it (training-documents.ts): the conversations after the first `trainFraction`,
 * the assistant's positions only.
 */
import { join, resolve } from 'node:path';
import type { RouterJson } from '../../edge/routing/router.ts';
import { checkRouterTrainedFor } from '../../edge/routing/edge-model-identity.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, readJsonFile } from '../../shared/model/model-pack.ts';
import { scoreWithRouterPack } from './batch-scorer.ts';
import { routingCurve, type RoutingCurve } from './routing-curve.ts';
import type { TeacherForced } from '../lab/forced-records.ts';
import { teacherForceSequences } from '../lab/teacher-forcing.ts';
import { openToolCloud } from '../lab/tool-cloud.ts';
import type { ShimScorerOptions } from '../lab/cloud-scorer.ts';
import { loadLabModel } from '../lab/lab-model.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { splitByParagraph } from '../lab/text-corpus.ts';
import { documentCount, readTrainingCorpus } from '../lab/training-corpus.ts';
import { chatTemplateFor, trainingDocuments } from '../lab/training-documents.ts';
import type { ProgressReporter } from '../lab/progress.ts';

export interface EvaluateRouterOptions {
  router: string;
  /** Default: the packs router.json names (relative to the router folder). */
  edgeModel?: string;
  cloudModel?: string;
  /** A running shim instead of a cloud pack. */
  cloud?: ShimScorerOptions;
  /** The packs' ONNX files; `model.onnx` when omitted. A router trained on one variant can be evaluated on another. */
  edgeModelFile?: string;
  cloudModelFile?: string;
  text: string;
  /** A chat dataset's template when not the edge pack's own (the edge's --chat-template). */
  chatTemplate?: string;
  trainFraction: number;
  thresholds?: readonly number[];
}

export async function evaluateRouter(o: EvaluateRouterOptions, progress?: ProgressReporter): Promise<RoutingCurve> {
  if (!(o.trainFraction >= 0 && o.trainFraction < 1)) {
    throw new AppError('INVALID_ARGUMENT', `--train-fraction must be in [0, 1), got ${o.trainFraction}`);
  }
  const root = resolve(o.router);
  const meta = readJsonFile(join(root, 'router.json')) as RouterJson;
  const edgeModel = o.edgeModel ?? resolve(root, meta.slm);
  const cloudModel = o.cloudModel ?? (meta.llm ? resolve(root, meta.llm) : undefined);
  if (!cloudModel && !o.cloud) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${root}/router.json names no cloud model pack (its "llm" key; a router trained through a shim has none): pass --cloud-model PACK or --cloud HOST:PORT`,
    );
  }
  const edgePack = loadModelPack(edgeModel, o.edgeModelFile);
  if (meta.hidden_size !== edgePack.hiddenSize) {
    throw new AppError('INVALID_ARGUMENT', `router ${root} expects hidden size ${meta.hidden_size}; ${edgePack.modelPath} has ${edgePack.hiddenSize}`);
  }
  // The edge would refuse it on another model: so does its evaluation.
  checkRouterTrainedFor(root, edgePack);
  const corpus = readTrainingCorpus(o.text);
  const { count, noun } = documentCount(corpus);
  const { heldOut } = splitByParagraph(
    Array.from({ length: count }, (_, i) => i),
    o.trainFraction,
  );
  if (heldOut.length === 0) throw new AppError('INVALID_ARGUMENT', `${o.text}: no ${noun}s after the first ${o.trainFraction}`);
  const tokenizer = await TextTokenizer.fromPack(edgePack.dir);
  const template = chatTemplateFor(corpus, tokenizer, edgePack.dir, o.chatTemplate);
  const edge = await loadLabModel(edgePack);
  let forced: TeacherForced;
  try {
    const cloud = await openToolCloud(o.cloud ? { shim: o.cloud } : { pack: cloudModel!, file: o.cloudModelFile }, edgePack, tokenizer);
    try {
      progress?.start('teacher forcing', heldOut.length);
      const sequences = trainingDocuments(corpus, { edgeModel: edge, tokenizer }, template).sequences(heldOut);
      forced = await teacherForceSequences({ edgeModel: edge, cloud: cloud.scorer, sequences, onSequence: (done) => progress?.update(done) });
    } finally {
      progress?.stop();
      await cloud.close();
    }
  } finally {
    await edge.release();
  }
  const scores = await scoreWithRouterPack(root, forced);
  return routingCurve(forced, scores, o.thresholds);
}
