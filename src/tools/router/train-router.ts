/**
 * `router train`: teacher-forces an edge/cloud pair over the training part of a text, labels every
 * position (divergence or CITER rule, labels.ts), trains the MLP with early stopping on a validation
 * split (by paragraph), then runs on-policy rounds (DAgger): generate with the current router, label the
 * system's own trajectories against the cloud, aggregate, retrain. A chat dataset (JSONL of `messages`)
 * is read through the edge pack's chat template instead: records at the assistant's tokens only, split by
 * conversation, rollouts from the turns up to each user message (training-documents.ts). Writes the router pack with each
 * round's figures and a report on held-out documents against the baselines (held-out-report.ts). Bad input
 * fails before anything is written. Options and defaults: train-router-options.ts; figures: train-report.ts.
 *
 * @example
 * const report = await trainRouter({ edgeModel: 'models/stories260k-3l', cloudModel: 'models/stories260k',
 *   text: 'stories.txt', out: 'models/router', trainFraction: 0.8, seed: 0, maxEpochs: 30, hiddenUnits: 64,
 *   labels: 'citer', features: ['hidden', 'logit_stats', 'repetition'], rounds: 2, rolloutPrompts: 64, rolloutTokens: 48 });
 */
import { resolve } from 'node:path';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { AppError } from '../../shared/errors.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { readsToken, type FeatureGroup } from '../../edge/routing/router-features.ts';
import { loadLabModel } from '../lab/lab-model.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { inputWidth, routerInputs } from '../lab/feature-matrix.ts';
import type { TeacherForced } from '../lab/forced-records.ts';
import { concatForced, selectParagraphs } from '../lab/forced-selection.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { quantileThreshold } from '../lab/ratio-matching.ts';
import type { Prompt } from '../lab/generation-runs.ts';
import { teacherForceSequences } from '../lab/teacher-forcing.ts';
import { openToolCloud } from '../lab/tool-cloud.ts';
import { splitByParagraph } from '../lab/text-corpus.ts';
import { documentCount, readTrainingCorpus } from '../lab/training-corpus.ts';
import { chatTemplateFor, trainingDocuments } from '../lab/training-documents.ts';
import { accuracyAt, auc, labelBalance } from './classifier-metrics.ts';
import { labelsBy, labelsFor, readsHorizon, SOFT_LABEL_RULES, type LabelRule, type RolloutLabelRule } from './labels.ts';
import { chargeLoopSteps, HORIZON_TOKENS, medianRouteGain, type HorizonReading } from './horizon-gain.ts';
import { mergeMembers, type MlpWeights, predict } from './mlp.ts';
import { MlpRouter } from './mlp-router.ts';
import { collectTrajectories } from './on-policy.ts';
import { heldOutReport } from './held-out-report.ts';
import { checkFolderOutput } from '../models/output-ownership.ts';
import { ROUTER_TRAIN_TOOL, writeRouterPack } from './router-pack.ts';
import { routerSource } from './router-source.ts';
import {
  loopCostShare,
  DEFAULT_MEMBERS,
  DEFAULT_ROLLOUT_WEIGHT,
  defaultRolloutLabels,
  DEFAULT_ROUTER_LEARNING_RATE,
  DEFAULT_THRESHOLD,
  defaultFeatures,
  ROLLOUT_PREFIX_TOKENS,
  ROLLOUT_SHARES,
  VALIDATION_FRACTION,
  validateRolloutRule,
  validateTrainOptions,
  type TrainRouterOptions,
} from './train-router-options.ts';
import { routerMeta, type RoundReport, type TrainRouterReport } from './train-report.ts';
import type { Dataset } from './train-mlp.ts';
import { trainMembers } from './member-training.ts';

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

/**
 * Records with their rule's binary labels and training targets (labels.ts says how each rule treats
 * rollouts), and their weight in the loss (the rollouts': --rollout-weight).
 */
type Labelled = { forced: TeacherForced; labels: Uint8Array; targets: Float32Array; weight: number };

function labelled(forced: TeacherForced, rule: LabelRule | RolloutLabelRule, horizon?: HorizonReading, weight = 1): Labelled {
  return { forced, ...labelsFor(rule, forced, horizon), weight };
}

function dataset(parts: readonly Labelled[], features: readonly FeatureGroup[]): Dataset {
  const forced = concatForced(parts.map((p) => p.forced));
  const labels = new Uint8Array(forced.count);
  const targets = new Float32Array(forced.count);
  // None where every row weighs 1: the unweighted arithmetic, to the bit.
  const weights = parts.some((p) => p.weight !== 1) ? new Float32Array(forced.count) : undefined;
  let at = 0;
  for (const p of parts) {
    labels.set(p.labels, at);
    targets.set(p.targets, at);
    weights?.fill(p.weight, at, at + p.labels.length);
    at += p.labels.length;
  }
  return {
    features: routerInputs(forced, features).features,
    labels,
    targets,
    rows: forced.count,
    ...(weights ? { weights } : {}),
    ...(readsToken(features) ? { proposed: forced.proposed } : {}),
  };
}

function scored(weights: MlpWeights, set: Dataset): { auc: number; accuracy: number; scores: Float32Array } {
  const scores = predict(weights, set.features, set.rows, set.proposed);
  return { auc: auc(scores, set.labels), accuracy: accuracyAt(scores, set.labels, 0.5), scores };
}

/** Trains a router pack as the header says (options: train-router-options.ts; figures: train-report.ts). */
export async function trainRouter(o: TrainRouterOptions, progress?: ProgressReporter): Promise<TrainRouterReport> {
  const started = performance.now();
  validateTrainOptions(o);
  // Training takes minutes: an --out it would refuse to replace is said before, not after.
  const claim = { tool: ROUTER_TRAIN_TOOL, force: o.force };
  checkFolderOutput(resolve(o.out), claim);
  const corpus = readTrainingCorpus(o.text);
  // A report on another file reads all of it (e.g. a held-back set no model of the pair was trained on).
  const reportCorpus = o.report?.text ? readTrainingCorpus(o.report.text) : corpus;
  const features = o.features ?? defaultFeatures(corpus.kind);
  const edgePack = loadModelPack(o.edgeModel, o.edgeModelFile);
  const documentsIn = documentCount(corpus);
  // Document indices: paragraphs of text, or a chat dataset's conversations (split by conversation).
  const { train, heldOut } = splitByParagraph(
    Array.from({ length: documentsIn.count }, (_, i) => i),
    o.trainFraction,
  );
  if (train.length < 2) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${o.text}: ${documentsIn.count} ${documentsIn.noun}(s); training needs at least 2 in its first ${o.trainFraction}${corpus.kind === 'text' ? ' (blank-line separated)' : ''}`,
    );
  }
  const rolloutRule = o.rolloutLabels ?? defaultRolloutLabels(corpus.kind);
  const rolloutWeight = o.rolloutWeight ?? DEFAULT_ROLLOUT_WEIGHT;
  validateRolloutRule(o, rolloutRule);
  const source = await routerSource({ ...o, rolloutLabels: rolloutRule });
  const validation = validationParagraphs(train.length, o.seed);

  const tokenizer = await TextTokenizer.fromPack(edgePack.dir);
  const template = chatTemplateFor(corpus, tokenizer, edgePack.dir, o.chatTemplate);
  const reportTemplate = reportCorpus === corpus ? template : chatTemplateFor(reportCorpus, tokenizer, edgePack.dir, o.chatTemplate);
  const edgeModel = await loadLabModel(edgePack);
  const cloud = await openToolCloud(o.cloud ? { shim: o.cloud } : { pack: o.cloudModel!, file: o.cloudModelFile }, edgePack, tokenizer).catch(
    async (e: unknown) => {
      await edgeModel.release();
      throw e;
    },
  );
  try {
    const documents = trainingDocuments(corpus, { edgeModel, tokenizer }, template);
    let forced: TeacherForced;
    try {
      progress?.start('teacher forcing', train.length);
      forced = await teacherForceSequences({
        edgeModel,
        cloud: cloud.scorer,
        sequences: documents.sequences(train),
        onSequence: (done) => progress?.update(done),
      });
    } finally {
      progress?.stop();
    }

    const trainParts: Labelled[] = [
      labelled(
        selectParagraphs(forced, (p) => !validation.has(p)),
        o.labels,
      ),
    ];
    const tfValidation = labelled(
      selectParagraphs(forced, (p) => validation.has(p)),
      o.labels,
    );
    const validationParts: Labelled[] = [tfValidation];
    const balance = labelBalance(labelsBy(o.labels, forced));
    if (trainParts[0]!.forced.count === 0 || tfValidation.forced.count === 0 || !(balance > 0 && balance < 1)) {
      throw new AppError('INVALID_ARGUMENT', `${o.text}: too little text to train on (${forced.count} positions, share labelled keep ${balance})`);
    }
    const inputSize = inputWidth(forced.hiddenSize, features);
    const members = o.members ?? DEFAULT_MEMBERS;
    /** Each member continues from its own weights of the previous round; the router is their merge (mlp.ts). */
    const fit = async (round: number, initial?: readonly MlpWeights[]): Promise<FitResult> => {
      const trainSet = dataset(trainParts, features);
      const validationSet = dataset(validationParts, features);
      const label = round === 0 ? 'training' : `training (round ${round})`;
      // Early stopping ends most members before maxEpochs: the bar counts epochs run, over all members.
      progress?.start(members > 1 ? `${label}, ${members} members` : label, members * o.maxEpochs);
      let epochs = 0;
      const results = await trainMembers(
        trainSet,
        validationSet,
        Array.from({ length: members }, (_, k) => ({
          inputSize,
          hiddenUnits: o.hiddenUnits,
          // Member 0 keeps the seed itself, so one member trains exactly what a single MLP did.
          seed: o.seed + k,
          maxEpochs: o.maxEpochs,
          learningRate: o.learningRate ?? DEFAULT_ROUTER_LEARNING_RATE,
          initial: initial?.[k],
          ...(readsToken(features) ? { tokenVocabSize: edgePack.vocabSize } : {}),
        })),
        (k, e) => progress?.update(++epochs, `member ${k + 1} val loss ${e.validationLoss.toFixed(4)}`),
      ).finally(() => progress?.stop());
      return {
        members: results.map((r) => r.weights),
        weights: mergeMembers(results.map((r) => r.weights)),
        epochsRun: Math.max(...results.map((r) => r.epochsRun)),
        bestEpoch: Math.max(...results.map((r) => r.bestEpoch)),
      };
    };
    const tfValidationSet = dataset([tfValidation], features);
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
        const onPolicy = scored(result.weights, dataset(validationParts.slice(1), features));
        report.onPolicyValAuc = onPolicy.auc;
        report.onPolicyValAccuracy = onPolicy.accuracy;
      }
      return report;
    };

    let result = await fit(0);
    if (!Number.isFinite(scored(result.weights, tfValidationSet).auc)) {
      throw new AppError('INVALID_ARGUMENT', `${o.text}: the validation ${documentsIn.noun}s have only one label class; give more text`);
    }
    rounds.push(figures(0, result, 0));
    const trainPrompts = documents.rolloutPrompts(
      train.filter((p) => !validation.has(p)),
      ROLLOUT_PREFIX_TOKENS,
    );
    const validationPrompts = documents.rolloutPrompts(
      train.filter((p) => validation.has(p)),
      ROLLOUT_PREFIX_TOKENS,
    );
    const validationPerRound = Math.max(1, Math.ceil(o.rolloutPrompts * VALIDATION_FRACTION));
    // Fixed by the first rollouts' readings when not given, then the same for every round and validation.
    let loopCost = rolloutRule === 'horizon-nll' ? o.loopCost : 0;
    const charged = (reading: HorizonReading | undefined) => {
      if (!reading) return undefined;
      loopCost ??= loopCostShare(corpus.kind) * medianRouteGain(reading);
      return chargeLoopSteps(reading, loopCost);
    };
    for (let round = 1; round <= o.rounds && trainPrompts.length > 0; round++) {
      const router = new MlpRouter(result.weights, features);
      const validationScores = scored(result.weights, tfValidationSet).scores;
      const thresholds = ROLLOUT_SHARES.map((share) => quantileThreshold(Array.from(validationScores), share));
      // Each round reads the next prompts (wrapping around), so the rounds see different stories.
      const take = (list: Prompt[], n: number) => Array.from({ length: Math.min(n, list.length) }, (_, k) => list[((round - 1) * n + k) % list.length]!);
      const rolloutOf = async (prompts: Prompt[], phase: string) => {
        progress?.start(phase, prompts.length);
        try {
          return await collectTrajectories({
            edgeModel,
            cloud,
            tokenizer,
            router,
            prompts,
            thresholds,
            maxNewTokens: o.rolloutTokens,
            seed: o.seed + round * 100_003,
            horizon: readsHorizon(rolloutRule) ? (o.horizonTokens ?? HORIZON_TOKENS) : undefined,
            onPrompt: (done) => progress?.update(done),
          });
        } finally {
          progress?.stop();
        }
      };
      const rollout = await rolloutOf(take(trainPrompts, o.rolloutPrompts), `rollouts (round ${round})`);
      trainParts.push(labelled(rollout.forced, rolloutRule, charged(rollout.horizon), rolloutWeight));
      if (validationPrompts.length > 0) {
        const held = await rolloutOf(take(validationPrompts, validationPerRound), `validation rollouts (round ${round})`);
        validationParts.push(labelled(held.forced, rolloutRule, charged(held.horizon), rolloutWeight));
      }
      result = await fit(round, result.members);
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

    // Measured before writing, so router.json holds it: what the router is worth against --router builtin.
    const reportOn =
      reportCorpus === corpus
        ? { documents, heldOut }
        : {
            documents: trainingDocuments(reportCorpus, { edgeModel, tokenizer }, reportTemplate),
            heldOut: [...Array(documentCount(reportCorpus).count).keys()],
          };
    const held =
      o.report?.documents && reportOn.heldOut.length
        ? await heldOutReport({
            edge: { edgeModel, tokenizer, cloud: cloud.client },
            scorer: cloud.scorer,
            ...reportOn,
            noun: documentCount(reportCorpus).noun,
            weights: result.weights,
            features,
            settings: o.report,
            seed: o.seed,
            progress,
          })
        : undefined;
    const last = rounds[rounds.length - 1]!;
    const defaultThreshold =
      o.defaultThreshold ??
      (SOFT_LABEL_RULES.includes(o.labels) ? softRuleThreshold(scored(result.weights, tfValidationSet).scores, tfValidationSet.labels) : DEFAULT_THRESHOLD);
    const report: TrainRouterReport = {
      out: resolve(o.out),
      paragraphs: { train: train.length - validation.size, validation: validation.size, heldOut: heldOut.length },
      ...(corpus.kind === 'chat' ? { chat: { skippedLines: corpus.skipped } } : {}),
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
      features,
      // No rollouts, no loop step charged.
      ...(rolloutRule === 'horizon-nll' ? { loopCost: loopCost ?? 0, ...(o.loopCost === undefined ? { loopCostShare: loopCostShare(corpus.kind) } : {}) } : {}),
      rounds,
      ...(held ? { heldOut: held } : {}),
      seconds: 0,
    };
    const meta = routerMeta(o, report, {
      edgeModelDir: edgePack.dir,
      cloudModelDir: cloud.pack?.dir,
      cloud: cloud.description,
      hiddenSize: forced.hiddenSize,
      corpus,
      rolloutRule,
    });
    await writeRouterPack(o.out, { weights: result.weights, meta, source }, claim);
    report.seconds = (performance.now() - started) / 1000;
    return report;
  } finally {
    await cloud.close();
    await edgeModel.release();
  }
}
