/**
 * `router eval`: the routing curve of a router pack on the held-out part of a text (the paragraphs after
 * the first `trainFraction`, which training never sees), by teacher forcing both models.
 */
import { join, resolve } from 'node:path';
import type { RouterJson } from '../../edge/router.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, readJsonFile } from '../../shared/model-pack.ts';
import { scoreWithRouterPack } from './batch-scorer.ts';
import { routingCurve, type RoutingCurve } from './routing-curve.ts';
import type { TeacherForced } from '../lab/forced-records.ts';
import { teacherForcePacks } from '../lab/teacher-forcing.ts';
import { readTextCorpus, splitByParagraph } from '../lab/text-corpus.ts';
import type { ProgressReporter } from '../lab/progress.ts';

export interface EvaluateRouterOptions {
  router: string;
  /** Default: the packs router.json names (relative to the router folder). */
  edgeModel?: string;
  cloudModel?: string;
  /** The packs' ONNX files; `model.onnx` when omitted. A router trained on one variant can be evaluated on another. */
  edgeModelFile?: string;
  cloudModelFile?: string;
  text: string;
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
  if (!cloudModel) throw new AppError('INVALID_ARGUMENT', `${root}/router.json names no cloud model pack (its "llm" key); pass --cloud-model`);
  const edgePack = loadModelPack(edgeModel, o.edgeModelFile);
  const cloudPack = loadModelPack(cloudModel, o.cloudModelFile);
  if (meta.hidden_size !== edgePack.hiddenSize) {
    throw new AppError('INVALID_ARGUMENT', `router ${root} expects hidden size ${meta.hidden_size}; ${edgePack.modelPath} has ${edgePack.hiddenSize}`);
  }
  const { heldOut } = splitByParagraph(readTextCorpus(o.text).paragraphs, o.trainFraction);
  if (heldOut.length === 0) throw new AppError('INVALID_ARGUMENT', `${o.text}: no paragraphs after the first ${o.trainFraction}`);
  let forced: TeacherForced;
  try {
    progress?.start('teacher forcing', heldOut.length);
    forced = await teacherForcePacks(edgePack, cloudPack, heldOut, (done) => progress?.update(done));
  } finally {
    progress?.stop();
  }
  const scores = await scoreWithRouterPack(root, forced);
  return routingCurve(forced, scores, o.thresholds);
}
