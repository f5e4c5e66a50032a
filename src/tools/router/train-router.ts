/**
 * `router train`: teacher-forces an edge/cloud pair over the training part of a text, labels every
 * position the CITER shortcut way, trains the MLP with early stopping on a validation split (by
 * paragraph), and writes the router pack. Bad input fails before anything is written.
 *
 * @example
 * const report = await trainRouter({ slm: 'models/stories260k-3l', llm: 'models/stories260k',
 *   text: 'stories.txt', out: 'models/router', trainFraction: 0.8, seed: 0, maxEpochs: 30, hiddenUnits: 64 });
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import type { RouterJson } from '../../edge/router.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, type ModelPack } from '../../shared/model-pack.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { accuracyAt, auc, labelBalance } from './classifier-metrics.ts';
import { citerLabels, LABEL_RULE } from './labels.ts';
import { predict } from './mlp.ts';
import { writeRouterPack } from './router-pack.ts';
import { checkSameVocabulary, selectParagraphs, teacherForcePacks, type TeacherForced } from './teacher-forcing.ts';
import { readTextCorpus, splitByParagraph } from './text-corpus.ts';
import { trainMlp, type Dataset } from './train-mlp.ts';

/** Bump when training changes what it produces, so `models demo` retrains older routers. */
export const TRAINER_VERSION = 1;
/** Share of the training paragraphs set aside for validation (early stopping and the reported figures). */
export const VALIDATION_FRACTION = 0.1;
/** Score below which a token is routed by default: with a calibrated P(keep), 0.5 is the decision that errs least often. */
export const DEFAULT_THRESHOLD = 0.5;
/** `--hidden-units` when not given. */
export const DEFAULT_HIDDEN_UNITS = 64;

export interface TrainRouterOptions {
  slm: string;
  llm: string;
  /** The packs' ONNX files (hub folders hold several variants); `model.onnx` when omitted. */
  slmFile?: string;
  llmFile?: string;
  text: string;
  out: string;
  /** The first fraction of the paragraphs (by order) is trained on; the rest is held out. */
  trainFraction: number;
  seed: number;
  maxEpochs: number;
  hiddenUnits: number;
}

export interface TrainRouterReport {
  out: string;
  paragraphs: { train: number; validation: number; heldOut: number };
  examples: number;
  trainExamples: number;
  validationExamples: number;
  /** Share of label 1 (keep the edge token) among all training-corpus examples. */
  labelBalance: number;
  validationLabelBalance: number;
  valAuc: number;
  valAccuracy: number;
  epochsRun: number;
  bestEpoch: number;
  defaultThreshold: number;
  seconds: number;
}

export interface ProgressReporter {
  start(phase: string, total: number): void;
  update(value: number, detail?: string): void;
  stop(): void;
}

export function validateTrainOptions(o: TrainRouterOptions): void {
  const bad = (message: string): never => {
    throw new AppError('INVALID_ARGUMENT', message);
  };
  if (!(o.trainFraction > 0 && o.trainFraction < 1)) bad(`--train-fraction must be in (0, 1), got ${o.trainFraction}`);
  if (!Number.isInteger(o.seed) || o.seed < 0 || o.seed > 2 ** 32 - 1) bad(`--seed must be an integer in [0, 2^32), got ${o.seed}`);
  if (!Number.isInteger(o.maxEpochs) || o.maxEpochs < 1 || o.maxEpochs > 10_000) bad(`--epochs must be an integer in [1, 10000], got ${o.maxEpochs}`);
  if (!Number.isInteger(o.hiddenUnits) || o.hiddenUnits < 1 || o.hiddenUnits > 65_536) {
    bad(`--hidden-units must be an integer in [1, 65536], got ${o.hiddenUnits}`);
  }
  for (const pack of [o.slm, o.llm]) {
    if (resolve(pack) === resolve(o.out)) bad(`--out ${o.out} would replace the model pack ${pack}`);
  }
}

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
  return {
    tool: 'router-train',
    trainerVersion: TRAINER_VERSION,
    slmSha256: await packSha256(loadModelPack(o.slm, o.slmFile)),
    llmSha256: await packSha256(loadModelPack(o.llm, o.llmFile)),
    textSha256: readTextCorpus(o.text).sha256,
    trainFraction: o.trainFraction,
    seed: o.seed,
    maxEpochs: o.maxEpochs,
    hiddenUnits: o.hiddenUnits,
  };
}

/** A seeded choice of ⌈fraction · n⌉ (at least one) of the paragraph indices [0, n). */
function validationParagraphs(n: number, seed: number): Set<number> {
  const order = Array.from({ length: n }, (_, i) => i);
  const random = seededRandom(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return new Set(order.slice(0, Math.max(1, Math.ceil(n * VALIDATION_FRACTION))));
}

function dataset(forced: TeacherForced): Dataset {
  return { features: forced.hidden, labels: citerLabels(forced), rows: forced.count };
}

export async function trainRouter(o: TrainRouterOptions, progress?: ProgressReporter): Promise<TrainRouterReport> {
  const started = performance.now();
  validateTrainOptions(o);
  const corpus = readTextCorpus(o.text);
  const slmPack = loadModelPack(o.slm, o.slmFile);
  const llmPack = loadModelPack(o.llm, o.llmFile);
  checkSameVocabulary(slmPack, llmPack);
  const { train, heldOut } = splitByParagraph(corpus.paragraphs, o.trainFraction);
  if (train.length < 2) {
    throw new AppError('INVALID_ARGUMENT', `${o.text}: ${corpus.paragraphs.length} paragraph(s); training needs at least 2 in its first ${o.trainFraction} (blank-line separated)`);
  }
  const source = await routerSource(o);
  const validation = validationParagraphs(train.length, o.seed);

  let forced: TeacherForced;
  try {
    progress?.start('teacher forcing', train.length);
    forced = await teacherForcePacks(slmPack, llmPack, train, (done) => progress?.update(done));
  } finally {
    progress?.stop();
  }

  const trainSet = dataset(selectParagraphs(forced, (p) => !validation.has(p)));
  const validationSet = dataset(selectParagraphs(forced, (p) => validation.has(p)));
  const balance = labelBalance(citerLabels(forced));
  if (trainSet.rows === 0 || validationSet.rows === 0 || !(balance > 0 && balance < 1)) {
    throw new AppError('INVALID_ARGUMENT', `${o.text}: too little text to train on (${forced.count} positions, share labelled keep ${balance})`);
  }

  progress?.start('training', o.maxEpochs);
  const result = (() => {
    try {
      return trainMlp(trainSet, validationSet, {
        inputSize: forced.hiddenSize,
        hiddenUnits: o.hiddenUnits,
        seed: o.seed,
        maxEpochs: o.maxEpochs,
        onEpoch: (e) => progress?.update(e.epoch, `val loss ${e.validationLoss.toFixed(4)}`),
      });
    } finally {
      progress?.stop();
    }
  })();

  const scores = predict(result.weights, validationSet.features, validationSet.rows);
  const valAuc = auc(scores, validationSet.labels);
  if (!Number.isFinite(valAuc)) {
    throw new AppError('INVALID_ARGUMENT', `${o.text}: the validation paragraphs have only one label class; give more text`);
  }
  const report: TrainRouterReport = {
    out: resolve(o.out),
    paragraphs: { train: train.length - validation.size, validation: validation.size, heldOut: heldOut.length },
    examples: forced.count,
    trainExamples: trainSet.rows,
    validationExamples: validationSet.rows,
    labelBalance: balance,
    validationLabelBalance: labelBalance(validationSet.labels),
    valAuc,
    valAccuracy: accuracyAt(scores, validationSet.labels, 0.5),
    epochsRun: result.epochsRun,
    bestEpoch: result.bestEpoch,
    defaultThreshold: DEFAULT_THRESHOLD,
    seconds: 0,
  };
  const meta: RouterJson = {
    hidden_size: forced.hiddenSize,
    slm: relative(resolve(o.out), slmPack.dir),
    llm: relative(resolve(o.out), llmPack.dir),
    default_threshold: DEFAULT_THRESHOLD,
    training: {
      labels: LABEL_RULE,
      examples: report.examples,
      train_examples: report.trainExamples,
      validation_examples: report.validationExamples,
      label_balance: report.labelBalance,
      val_auc: report.valAuc,
      val_accuracy: report.valAccuracy,
      epochs_run: report.epochsRun,
      best_epoch: report.bestEpoch,
      max_epochs: o.maxEpochs,
      seed: o.seed,
      train_fraction: o.trainFraction,
      validation_fraction: VALIDATION_FRACTION,
      paragraphs: report.paragraphs,
      text_sha256: corpus.sha256,
      hidden_units: o.hiddenUnits,
    },
  };
  await writeRouterPack(o.out, { weights: result.weights, meta, source });
  report.seconds = (performance.now() - started) / 1000;
  return report;
}

export function formatTrainReport(r: TrainRouterReport): string {
  return [
    `paragraphs: ${r.paragraphs.train} train, ${r.paragraphs.validation} validation, ${r.paragraphs.heldOut} held out (not used)`,
    `examples: ${r.examples} (${r.trainExamples} train, ${r.validationExamples} validation); label balance ${r.labelBalance.toFixed(4)} keep / ${(1 - r.labelBalance).toFixed(4)} route`,
    `validation: AUC ${r.valAuc.toFixed(4)}, accuracy@0.5 ${r.valAccuracy.toFixed(4)} (label balance ${r.validationLabelBalance.toFixed(4)})`,
    `epochs: ${r.epochsRun} run, best ${r.bestEpoch}; default threshold ${r.defaultThreshold}; ${r.seconds.toFixed(1)} s`,
  ].join('\n');
}
