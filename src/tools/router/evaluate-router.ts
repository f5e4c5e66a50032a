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
  slm?: string;
  llm?: string;
  /** The packs' ONNX files; `model.onnx` when omitted. A router trained on one variant can be evaluated on another. */
  slmFile?: string;
  llmFile?: string;
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
  const slm = o.slm ?? resolve(root, meta.slm);
  const llm = o.llm ?? (meta.llm ? resolve(root, meta.llm) : undefined);
  if (!llm) throw new AppError('INVALID_ARGUMENT', `${root}/router.json names no llm pack; pass --llm`);
  const slmPack = loadModelPack(slm, o.slmFile);
  const llmPack = loadModelPack(llm, o.llmFile);
  if (meta.hidden_size !== slmPack.hiddenSize) {
    throw new AppError('INVALID_ARGUMENT', `router ${root} expects hidden size ${meta.hidden_size}; ${slmPack.modelPath} has ${slmPack.hiddenSize}`);
  }
  const { heldOut } = splitByParagraph(readTextCorpus(o.text).paragraphs, o.trainFraction);
  if (heldOut.length === 0) throw new AppError('INVALID_ARGUMENT', `${o.text}: no paragraphs after the first ${o.trainFraction}`);
  let forced: TeacherForced;
  try {
    progress?.start('teacher forcing', heldOut.length);
    forced = await teacherForcePacks(slmPack, llmPack, heldOut, (done) => progress?.update(done));
  } finally {
    progress?.stop();
  }
  const scores = await scoreWithRouterPack(root, forced);
  return routingCurve(forced, scores, o.thresholds);
}
