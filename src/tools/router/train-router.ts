/**
 * `router train`: teacher-forces an edge/cloud pair over the training part of a text, labels every
 * position (divergence or CITER rule, labels.ts), trains the MLP with early stopping on a validation
 * split (by paragraph), then runs on-policy rounds (DAgger): generate with the current router, label the
 * system's own trajectories against the cloud, aggregate, retrain. Writes the router pack with each
 * round's figures. Bad input fails before anything is written.
 *
 * @example
 * const report = await trainRouter({ slm: 'models/stories260k-3l', llm: 'models/stories260k',
 *   text: 'stories.txt', out: 'models/router', trainFraction: 0.8, seed: 0, maxEpochs: 30, hiddenUnits: 64,
 *   labels: 'citer', features: ['hidden', 'logit_stats', 'repetition'], rounds: 2, rolloutPrompts: 64, rolloutTokens: 48 });
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import type { RouterJson } from '../../edge/router.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, type ModelPack } from '../../shared/model-pack.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { accuracyAt, auc, labelBalance } from './classifier-metrics.ts';
import { FEATURE_GROUPS, readsToken, type FeatureGroup } from '../../edge/router-features.ts';
import { DecoderModel } from '../../shared/decoder-model.ts';
import { TextTokenizer } from '../../shared/tokenizer.ts';
import { quantileThreshold } from '../eval/ratio-matching.ts';
import { continuationPrompts } from '../eval/text-eval.ts';
import { inputWidth, routerInputs } from './feature-matrix.ts';
import { LABEL_RULE_TEXT, LABEL_RULES, labelsBy, labelsFor, ROLLOUT_LABEL_RULES, SOFT_LABEL_RULES, type LabelRule, type RolloutLabelRule } from './labels.ts';
import { mergeMembers, type MlpWeights, predict } from './mlp.ts';
import { MlpRouter } from './mlp-router.ts';
import { collectTrajectories } from './on-policy.ts';
import { writeRouterPack } from './router-pack.ts';
import { checkSameVocabulary, concatForced, selectParagraphs, teacherForce, type TeacherForced } from './teacher-forcing.ts';
import { readTextCorpus, splitByParagraph } from './text-corpus.ts';
import { DEFAULT_LEARNING_RATE, trainMlp, type Dataset } from './train-mlp.ts';

/** Bump when training changes what it produces, so `models demo` retrains older routers. */
export const TRAINER_VERSION = 4;
/** Share of the training paragraphs set aside for validation (early stopping and the reported figures). */
export const VALIDATION_FRACTION = 0.1;
/**
 * Score below which a token is routed by default, for the hard label rules: with a calibrated P(keep),
 * 0.5 is the decision that errs least often. A soft rule's score is (1 − E[gain]) / 2, below 0.5 wherever
 * routing is expected to gain anything at all (87% of the truncated pair's positions), so its default is
 * measured instead: `softRuleThreshold`.
 */
export const DEFAULT_THRESHOLD = 0.5;

/**
 * The default threshold of a router trained on a soft rule: the score below which it routes as many of the
 * teacher-forced validation positions as its binary labels mark for routing (for `mixed-gain` and `gain`,
 * those where only the cloud's top-1 is the true token). It routes about as much as a hard-label router
 * at 0.5, choosing the positions by expected gain.
 */
export function softRuleThreshold(validationScores: ArrayLike<number>, validationLabels: Uint8Array): number {
  // Three decimals: what router.json and the page show.
  return Math.round(quantileThreshold(Array.from(validationScores), 1 - labelBalance(validationLabels)) * 1000) / 1000;
}
/** `--hidden-units` when not given (per member). */
export const DEFAULT_HIDDEN_UNITS = 64;
/**
 * `--members` when not given: independently initialised MLPs whose logits are averaged (one MLP of
 * members × hidden units in router.onnx). Three recover about a point more of the gap than one
 * (docs/router-training.md).
 */
export const DEFAULT_MEMBERS = 3;
/**
 * Adam's step size and the epoch cap per round when `--learning-rate` / `--epochs` are not given. The
 * router's inputs are wide (two hidden states and the token table) and its labels soft, and a third of
 * the MLP trainer's default step (DEFAULT_LEARNING_RATE) fits them better: measured on the truncated
 * pair it left fewer loops in free-running text at the same teacher-forced accuracy
 * (docs/router-training.md); it needs about twice the epochs, hence the cap.
 */
export const DEFAULT_ROUTER_LEARNING_RATE = 3e-4;
export const DEFAULT_EPOCHS = 60;
/** Defaults of the on-policy rounds (`--rounds`, `--rollout-prompts`, `--rollout-tokens`) and features. */
export const DEFAULT_ROUNDS = 3;
export const DEFAULT_ROLLOUT_PROMPTS = 64;
export const DEFAULT_ROLLOUT_TOKENS = 64;
export const DEFAULT_FEATURES: readonly FeatureGroup[] = FEATURE_GROUPS;
/**
 * Label rules when not given: mixed-gain on the teacher-forced text (what routing gains against the text
 * and in the cloud's expectation; 2 points above CITER's at 30% routed on the truncated pair),
 * divergence on the rollouts (which have no text, and where it is what breaks loops); measured in
 * docs/router-training.md.
 */
export const DEFAULT_LABELS: LabelRule = 'mixed-gain';
export const DEFAULT_ROLLOUT_LABELS: RolloutLabelRule = 'divergence';
/** What `models demo` trains the demo router with (CI trains it before every test run). */
export const DEMO_ROUTER_TRAINING = {
  // The MLP trainer's larger step and half the epochs: CI's time, and the figures of the demo thresholds.
  maxEpochs: 30,
  learningRate: DEFAULT_LEARNING_RATE,
  // One member: CI trains both demo routers before every run, and three would triple that.
  members: 1,
  // CITER's: the demo routers' thresholds (the page's τ, paths.ts) were measured on scores that estimate P(keep).
  labels: 'citer',
  features: FEATURE_GROUPS,
  rounds: 2,
  rolloutPrompts: 48,
  rolloutTokens: 48,
} as const satisfies Partial<TrainRouterOptions>;
/** Routed shares whose thresholds (on the validation scores) the rollouts cycle through. */
export const ROLLOUT_SHARES = [0.1, 0.3, 0.5] as const;
/** A rollout prompt: the first tokens of a training paragraph, as in the evaluation's continuations. */
export const ROLLOUT_PREFIX_TOKENS = 16;

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
  /** Ensemble members (DEFAULT_MEMBERS when not given). */
  members?: number;
  /** Adam's step size (DEFAULT_ROUTER_LEARNING_RATE when not given). */
  learningRate?: number;
  /** The τ written to router.json (DEFAULT_THRESHOLD when not given): a pair's measured choice, e.g. the demo's. */
  defaultThreshold?: number;
  /** Label rule of the teacher-forced text (labels.ts). */
  labels: LabelRule;
  /** Label rule of the on-policy records, which have no true text (divergence when not given, or cloud-gain). */
  rolloutLabels?: RolloutLabelRule;
  /** Feature groups the router reads, `hidden` included. */
  features: readonly FeatureGroup[];
  /** On-policy rounds after the teacher-forced fit (0 = teacher forcing only, the first trainer's way). */
  rounds: number;
  /** Training prompts generated from per round (each greedily and sampled). */
  rolloutPrompts: number;
  rolloutTokens: number;
}

/** One round's figures: round 0 is the teacher-forced fit, later rounds add on-policy records. */
export interface RoundReport {
  round: number;
  /** Records trained on (aggregated), and those the round's rollouts added. */
  trainExamples: number;
  added: number;
  /** The rollouts of this round (made with the previous round's router): routed share, loops. */
  rollout?: { trajectories: number; tokens: number; routedRatio: number; greedyStuck: number; greedyOutputs: number; greedyRep4: number };
  /** AUC and accuracy@0.5 on the teacher-forced validation paragraphs, and on the on-policy validation records so far. */
  valAuc: number;
  valAccuracy: number;
  onPolicyValAuc?: number;
  onPolicyValAccuracy?: number;
  epochsRun: number;
  bestEpoch: number;
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
  labels: LabelRule;
  features: readonly FeatureGroup[];
  rounds: RoundReport[];
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
  if (o.members !== undefined && (!Number.isInteger(o.members) || o.members < 1 || o.members > 16)) bad(`--members must be an integer in [1, 16], got ${o.members}`);
  if (o.learningRate !== undefined && !(o.learningRate > 0 && o.learningRate <= 1)) bad(`--learning-rate must be in (0, 1], got ${o.learningRate}`);
  if (!LABEL_RULES.includes(o.labels)) bad(`--labels must be one of ${LABEL_RULES.join(', ')}, got ${JSON.stringify(o.labels)}`);
  if (o.rolloutLabels !== undefined && !ROLLOUT_LABEL_RULES.includes(o.rolloutLabels)) bad(`--rollout-labels must be one of ${ROLLOUT_LABEL_RULES.join(', ')}, got ${JSON.stringify(o.rolloutLabels)}`);
  if (!o.features.includes('hidden') || o.features.some((f) => !FEATURE_GROUPS.includes(f))) {
    bad(`--features must be a comma-separated list of ${FEATURE_GROUPS.join(', ')} including hidden, got ${JSON.stringify(o.features.join(','))}`);
  }
  if (!Number.isInteger(o.rounds) || o.rounds < 0 || o.rounds > 10) bad(`--rounds must be an integer in [0, 10], got ${o.rounds}`);
  if (!Number.isInteger(o.rolloutPrompts) || o.rolloutPrompts < 1 || o.rolloutPrompts > 100_000) {
    bad(`--rollout-prompts must be an integer in [1, 100000], got ${o.rolloutPrompts}`);
  }
  if (!Number.isInteger(o.rolloutTokens) || o.rolloutTokens < 1 || o.rolloutTokens > 4096) bad(`--rollout-tokens must be an integer in [1, 4096], got ${o.rolloutTokens}`);
  if (o.defaultThreshold !== undefined && !(o.defaultThreshold >= 0 && o.defaultThreshold <= 1)) {
    bad(`default threshold must be in [0, 1], got ${o.defaultThreshold}`);
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
    members: o.members ?? DEFAULT_MEMBERS,
    learningRate: o.learningRate ?? DEFAULT_ROUTER_LEARNING_RATE,
    // Only when given, so routers trained with the default keep the source they were recorded with.
    ...(o.defaultThreshold === undefined ? {} : { defaultThreshold: o.defaultThreshold }),
    labels: o.labels,
    // Only when not the default, so routers trained before the option keep the source they were recorded with.
    ...((o.rolloutLabels ?? DEFAULT_ROLLOUT_LABELS) === DEFAULT_ROLLOUT_LABELS ? {} : { rolloutLabels: o.rolloutLabels }),
    features: o.features,
    rounds: o.rounds,
    rolloutPrompts: o.rolloutPrompts,
    rolloutTokens: o.rolloutTokens,
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

/** A round's fit: each member's weights, and the router they make together. */
interface FitResult {
  members: MlpWeights[];
  weights: MlpWeights;
  /** The most epochs any member ran, and the latest best epoch among them. */
  epochsRun: number;
  bestEpoch: number;
}

/** Records with their rule's binary labels and training targets (labels.ts says how each rule treats rollouts). */
interface Labelled {
  forced: TeacherForced;
  labels: Uint8Array;
  targets: Float32Array;
}

function labelled(forced: TeacherForced, rule: LabelRule): Labelled {
  return { forced, ...labelsFor(rule, forced) };
}

function dataset(parts: readonly Labelled[], features: readonly FeatureGroup[]): Dataset {
  const forced = concatForced(parts.map((p) => p.forced));
  const labels = new Uint8Array(forced.count);
  const targets = new Float32Array(forced.count);
  let at = 0;
  for (const p of parts) {
    labels.set(p.labels, at);
    targets.set(p.targets, at);
    at += p.labels.length;
  }
  return { features: routerInputs(forced, features).features, labels, targets, rows: forced.count, ...(readsToken(features) ? { proposed: forced.proposed } : {}) };
}

function scored(weights: MlpWeights, set: Dataset): { auc: number; accuracy: number; scores: Float32Array } {
  const scores = predict(weights, set.features, set.rows, set.proposed);
  return { auc: auc(scores, set.labels), accuracy: accuracyAt(scores, set.labels, 0.5), scores };
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
  const rolloutRule = o.rolloutLabels ?? DEFAULT_ROLLOUT_LABELS;
  const validation = validationParagraphs(train.length, o.seed);

  const tokenizer = await TextTokenizer.fromPack(slmPack.dir);
  const slm = await DecoderModel.load(slmPack);
  const llm = await DecoderModel.load(llmPack).catch(async (e) => {
    await slm.release();
    throw e;
  });
  try {
    let forced: TeacherForced;
    try {
      progress?.start('teacher forcing', train.length);
      forced = await teacherForce({ slm, llm, tokenizer, paragraphs: train, onParagraph: (done) => progress?.update(done) });
    } finally {
      progress?.stop();
    }

    const trainParts: Labelled[] = [labelled(selectParagraphs(forced, (p) => !validation.has(p)), o.labels)];
    const tfValidation = labelled(selectParagraphs(forced, (p) => validation.has(p)), o.labels);
    const validationParts: Labelled[] = [tfValidation];
    const balance = labelBalance(labelsBy(o.labels, forced));
    if (trainParts[0]!.forced.count === 0 || tfValidation.forced.count === 0 || !(balance > 0 && balance < 1)) {
      throw new AppError('INVALID_ARGUMENT', `${o.text}: too little text to train on (${forced.count} positions, share labelled keep ${balance})`);
    }
    const inputSize = inputWidth(forced.hiddenSize, o.features);
    const members = o.members ?? DEFAULT_MEMBERS;
    /** Each member continues from its own weights of the previous round; the router is their merge (mlp.ts). */
    const fit = (round: number, initial?: readonly MlpWeights[]): FitResult => {
      const trainSet = dataset(trainParts, o.features);
      const validationSet = dataset(validationParts, o.features);
      const results = Array.from({ length: members }, (_, k) => {
        const label = round === 0 ? 'training' : `training (round ${round})`;
        progress?.start(members > 1 ? `${label}, member ${k + 1}/${members}` : label, o.maxEpochs);
        try {
          return trainMlp(trainSet, validationSet, {
            inputSize,
            hiddenUnits: o.hiddenUnits,
            // Member 0 keeps the seed itself, so one member trains exactly what a single MLP did.
            seed: o.seed + k,
            maxEpochs: o.maxEpochs,
            learningRate: o.learningRate ?? DEFAULT_ROUTER_LEARNING_RATE,
            initial: initial?.[k],
            ...(readsToken(o.features) ? { tokenVocabSize: slmPack.vocabSize } : {}),
            onEpoch: (e) => progress?.update(e.epoch, `val loss ${e.validationLoss.toFixed(4)}`),
          });
        } finally {
          progress?.stop();
        }
      });
      return {
        members: results.map((r) => r.weights),
        weights: mergeMembers(results.map((r) => r.weights)),
        epochsRun: Math.max(...results.map((r) => r.epochsRun)),
        bestEpoch: Math.max(...results.map((r) => r.bestEpoch)),
      };
    };
    const tfValidationSet = dataset([tfValidation], o.features);
    const rounds: RoundReport[] = [];
    const figures = (round: number, result: FitResult, added: number, rollout?: RoundReport['rollout']): RoundReport => {
      const tf = scored(result.weights, tfValidationSet);
      const report: RoundReport = {
        round,
        trainExamples: trainParts.reduce((s, p) => s + p.forced.count, 0),
        added,
        ...(rollout ? { rollout } : {}),
        valAuc: tf.auc,
        valAccuracy: tf.accuracy,
        epochsRun: result.epochsRun,
        bestEpoch: result.bestEpoch,
      };
      if (validationParts.length > 1) {
        const onPolicy = scored(result.weights, dataset(validationParts.slice(1), o.features));
        report.onPolicyValAuc = onPolicy.auc;
        report.onPolicyValAccuracy = onPolicy.accuracy;
      }
      return report;
    };

    let result = fit(0);
    if (!Number.isFinite(scored(result.weights, tfValidationSet).auc)) {
      throw new AppError('INVALID_ARGUMENT', `${o.text}: the validation paragraphs have only one label class; give more text`);
    }
    rounds.push(figures(0, result, 0));
    const trainPrompts = continuationPrompts({ slm, tokenizer }, train.filter((_, p) => !validation.has(p)), Infinity, ROLLOUT_PREFIX_TOKENS);
    const validationPrompts = continuationPrompts({ slm, tokenizer }, train.filter((_, p) => validation.has(p)), Infinity, ROLLOUT_PREFIX_TOKENS);
    const validationPerRound = Math.max(1, Math.ceil(o.rolloutPrompts * VALIDATION_FRACTION));
    for (let round = 1; round <= o.rounds && trainPrompts.length > 0; round++) {
      const router = new MlpRouter(result.weights, o.features);
      const validationScores = scored(result.weights, tfValidationSet).scores;
      const thresholds = ROLLOUT_SHARES.map((share) => quantileThreshold(Array.from(validationScores), share));
      // Each round reads the next prompts (wrapping around), so the rounds see different stories.
      const take = (list: string[], n: number) => Array.from({ length: Math.min(n, list.length) }, (_, k) => list[((round - 1) * n + k) % list.length]!);
      const rolloutOf = async (prompts: string[], phase: string) => {
        progress?.start(phase, prompts.length);
        try {
          return await collectTrajectories({
            slm, llm, tokenizer, router, prompts, thresholds,
            maxNewTokens: o.rolloutTokens,
            seed: o.seed + round * 100_003,
            onPrompt: (done) => progress?.update(done),
          });
        } finally {
          progress?.stop();
        }
      };
      const rollout = await rolloutOf(take(trainPrompts, o.rolloutPrompts), `rollouts (round ${round})`);
      trainParts.push(labelled(rollout.forced, rolloutRule));
      if (validationPrompts.length > 0) {
        const held = await rolloutOf(take(validationPrompts, validationPerRound), `validation rollouts (round ${round})`);
        validationParts.push(labelled(held.forced, rolloutRule));
      }
      result = fit(round, result.members);
      rounds.push(
        figures(round, result, rollout.forced.count, {
          trajectories: rollout.trajectories,
          tokens: rollout.tokens,
          routedRatio: rollout.routedRatio,
          greedyStuck: rollout.greedy.stuck,
          greedyOutputs: rollout.greedy.outputs,
          greedyRep4: rollout.greedy.rep4,
        }),
      );
    }

    const last = rounds[rounds.length - 1]!;
    const defaultThreshold =
      o.defaultThreshold ??
      (SOFT_LABEL_RULES.includes(o.labels) ? softRuleThreshold(scored(result.weights, tfValidationSet).scores, tfValidationSet.labels) : DEFAULT_THRESHOLD);
    const report: TrainRouterReport = {
      out: resolve(o.out),
      paragraphs: { train: train.length - validation.size, validation: validation.size, heldOut: heldOut.length },
      examples: forced.count,
      trainExamples: last.trainExamples,
      validationExamples: tfValidation.forced.count,
      labelBalance: balance,
      validationLabelBalance: labelBalance(tfValidation.labels),
      valAuc: last.valAuc,
      valAccuracy: last.valAccuracy,
      epochsRun: last.epochsRun,
      bestEpoch: last.bestEpoch,
      defaultThreshold,
      labels: o.labels,
      features: o.features,
      rounds,
      seconds: 0,
    };
    const meta: RouterJson = {
      hidden_size: forced.hiddenSize,
      slm: relative(resolve(o.out), slmPack.dir),
      llm: relative(resolve(o.out), llmPack.dir),
      default_threshold: defaultThreshold,
      features: [...o.features],
      training: {
        labels: LABEL_RULE_TEXT[o.labels],
        label_rule: o.labels,
        on_policy_labels: o.rounds > 0 ? LABEL_RULE_TEXT[rolloutRule] : null,
        on_policy_label_rule: o.rounds > 0 ? rolloutRule : null,
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
        text: relative(resolve(o.out), resolve(corpus.path)),
        text_sha256: corpus.sha256,
        hidden_units: o.hiddenUnits,
        members: o.members ?? DEFAULT_MEMBERS,
        learning_rate: o.learningRate ?? DEFAULT_ROUTER_LEARNING_RATE,
        rounds: rounds.map(roundJson),
        rollout_prompts: o.rolloutPrompts,
        rollout_tokens: o.rolloutTokens,
      },
    };
    await writeRouterPack(o.out, { weights: result.weights, meta, source });
    report.seconds = (performance.now() - started) / 1000;
    return report;
  } finally {
    await llm.release();
    await slm.release();
  }
}

function roundJson(r: RoundReport): Record<string, unknown> {
  return {
    round: r.round,
    train_examples: r.trainExamples,
    added: r.added,
    ...(r.rollout
      ? {
          rollout: {
            trajectories: r.rollout.trajectories,
            tokens: r.rollout.tokens,
            routed_ratio: r.rollout.routedRatio,
            greedy_stuck: r.rollout.greedyStuck,
            greedy_outputs: r.rollout.greedyOutputs,
            greedy_rep4: r.rollout.greedyRep4,
          },
        }
      : {}),
    val_auc: r.valAuc,
    val_accuracy: r.valAccuracy,
    ...(r.onPolicyValAuc !== undefined ? { on_policy_val_auc: r.onPolicyValAuc, on_policy_val_accuracy: r.onPolicyValAccuracy } : {}),
    epochs_run: r.epochsRun,
    best_epoch: r.bestEpoch,
  };
}

export function formatTrainReport(r: TrainRouterReport): string {
  return [
    `paragraphs: ${r.paragraphs.train} train, ${r.paragraphs.validation} validation, ${r.paragraphs.heldOut} held out (not used)`,
    `examples: ${r.examples} (${r.trainExamples} train, ${r.validationExamples} validation); label balance ${r.labelBalance.toFixed(4)} keep / ${(1 - r.labelBalance).toFixed(4)} route`,
    `validation: AUC ${r.valAuc.toFixed(4)}, accuracy@0.5 ${r.valAccuracy.toFixed(4)} (label balance ${r.validationLabelBalance.toFixed(4)})`,
    `labels: ${r.labels}; features: ${r.features.join(', ')}`,
    ...r.rounds.map(formatRound),
    `epochs: ${r.epochsRun} run, best ${r.bestEpoch}; default threshold ${r.defaultThreshold}; ${r.seconds.toFixed(1)} s`,
  ].join('\n');
}

function formatRound(r: RoundReport): string {
  const rollout = r.rollout
    ? `; rollouts: ${r.rollout.trajectories} trajectories, ${r.rollout.tokens} tokens, routed ${r.rollout.routedRatio.toFixed(3)}, greedy stuck ${r.rollout.greedyStuck}/${r.rollout.greedyOutputs}, rep4 ${r.rollout.greedyRep4.toFixed(3)}, +${r.added} records`
    : '';
  const onPolicy = r.onPolicyValAuc !== undefined ? `, on-policy AUC ${r.onPolicyValAuc.toFixed(4)} accuracy@0.5 ${r.onPolicyValAccuracy!.toFixed(4)}` : '';
  return `round ${r.round}: ${r.trainExamples} records; validation AUC ${r.valAuc.toFixed(4)} accuracy@0.5 ${r.valAccuracy.toFixed(4)}${onPolicy}${rollout}`;
}
