/**
 * What `router train` is told: its options, their defaults (each with the measurement that chose it) and
 * their validation, so that bad input fails before anything is loaded or written.
 *
 * @example
 * validateTrainOptions({ ...DEMO_ROUTER_TRAINING, edgeModel, cloudModel, text, out, trainFraction: 0.8, seed: 0, hiddenUnits: 64 });
 */
import type { ShimScorerOptions } from '../lab/cloud-scorer.ts';
import { resolve } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { FEATURE_GROUPS, type FeatureGroup } from '../../edge/routing/router-features.ts';
import { LABEL_RULES, readsHorizon, ROLLOUT_LABEL_RULES, type LabelRule, type RolloutLabelRule } from './labels.ts';
import { DEFAULT_LEARNING_RATE } from './train-mlp.ts';
import { DEFAULT_ROUTER_THRESHOLD } from '../../shared/contract/router-threshold.ts';
import type { ReportSettings } from './held-out-report.ts';

/** Bump when training changes what it produces, so `models demo` retrains older routers. */
export const TRAINER_VERSION = 4;
/** Share of the training paragraphs set aside for validation (early stopping and the reported figures). */
export const VALIDATION_FRACTION = 0.1;
/**
 * Score below which a token is routed by default, for the hard label rules: with a calibrated P(keep),
 * 0.5 is the decision that errs least often. A soft rule's score is (1 − E[gain]) / 2, below 0.5 wherever
 * routing is expected to gain anything at all (most of the truncated pair's positions), so its default is
 * measured instead: `softRuleThreshold`.
 */
export const DEFAULT_THRESHOLD = DEFAULT_ROUTER_THRESHOLD;
/** `--hidden-units` when not given (per member). */
export const DEFAULT_HIDDEN_UNITS = 64;
/**
 * `--members` when not given: independently initialised MLPs whose logits are averaged (one MLP of
 * members × hidden units in router.onnx). Three recover more of the gap than one
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
/**
 * `--rollout-weight` when not given: the weight of an on-policy record in the loss, against 1 for a
 * teacher-forced one (training and early stopping alike). The rollouts teach what free running needs (where a
 * route steers the text, the loops), but their labels read the cloud over a horizon where the text's read the
 * true next token, and each round's records pulled the teacher-forced fit away: on the truncated 3-layer pair
 * the validation AUC fell round by round, and the share of the gap recovered with it (docs/router-training.md).
 * At half weight the rounds still move the router, and the text's fit holds.
 */
export const DEFAULT_ROLLOUT_WEIGHT = 0.5;
/**
 * horizon-nll's loop cost for text when `--loop-cost` is not given (text's default rule is horizon-loop-guard-nll,
 * which charges none: defaultRolloutLabels): this share of the median gain of a route
 * over the horizon (medianRouteGain), per loop step. A gain is in the pair's own nats, small where the two
 * models differ little and large where they differ a lot, so a cost fixed in nats weighs loops heavily
 * against the gains on one pair and lightly on another (docs/router-training.md, each run's loop_cost).
 */
export const TEXT_LOOP_COST_SHARE = 0.15;
/**
 * Defaults that depend on the dataset's kind. The loop measures (the `loop` group, horizon-nll's loop cost,
 * horizon-loop-guard-nll's loop rules) count a 4-gram seen anywhere in the context, the conversation included; a chat reply echoes the
 * conversation (its names, its phrases) where a story that repeats itself is in a loop, and on the chat pair
 * a router trained with the group or the cost lost to top-1 at 10% routed (docs/router-training.md). So a chat dataset's
 * router reads every group but `loop`, and charges no loop step; text gets both (defaultRolloutLabels).
 */
export function defaultFeatures(kind: 'text' | 'chat'): readonly FeatureGroup[] {
  return kind === 'text' ? FEATURE_GROUPS : FEATURE_GROUPS.filter((g) => g !== 'loop');
}

/** What horizon-nll charges a loop step in a branch, as a share of the median route gain, when `--loop-cost` is not given (see defaultFeatures). */
export function loopCostShare(kind: 'text' | 'chat'): number {
  return kind === 'text' ? TEXT_LOOP_COST_SHARE : 0;
}
/**
 * The label rule of the teacher-forced text when not given: mixed-gain (what routing gains against the text
 * and in the cloud's expectation; above CITER's on the truncated pair), measured, with why each rule was
 * chosen, in docs/router-training.md's ablation.
 */
export const DEFAULT_LABELS: LabelRule = 'mixed-gain';
/**
 * The rollouts' label rule when not given (they have no text), by the dataset's kind. Both weigh a route by
 * what it takes off the cloud's NLL of the output, the free-running perplexity's own terms, over the routed
 * token and the edge's next HORIZON_TOKENS after it, since what a route steers after it is what top-1
 * routing gains from. Text: horizon-loop-guard-nll, which also reads the loops over both branches (a route
 * that leads into more repeated 4-grams is kept, one that leads into fewer is routed): with horizon-nll's loop
 * rules at the next token alone, the distilled 3-layer pair's greedy output repeated itself more than random
 * routing's at 30% routed, its loops begun before the step that closes them. Chat: horizon-nll, without a
 * loop cost, since a reply echoes the conversation where a story that repeats itself is in a loop
 * (defaultFeatures). Measured in docs/router-training.md.
 */
export function defaultRolloutLabels(kind: 'text' | 'chat'): RolloutLabelRule {
  return kind === 'text' ? 'horizon-loop-guard-nll' : 'horizon-nll';
}
/** What `models demo` trains the demo router with (CI trains it before every test run). */
export const DEMO_ROUTER_TRAINING = {
  // The MLP trainer's larger step and half the epochs: CI's time, and the figures of the demo thresholds.
  maxEpochs: 30,
  learningRate: DEFAULT_LEARNING_RATE,
  // One member: CI trains both demo routers before every run, and three would triple that.
  members: 1,
  // CITER's: the demo routers' thresholds (the page's τ, paths.ts) were measured on scores that estimate P(keep).
  labels: 'citer',
  // Divergence on the rollouts, as the demo routers were trained before cloud-nll became the default.
  rolloutLabels: 'divergence',
  // The groups before `loop`: the demo thresholds were measured on routers that read these.
  features: ['hidden', 'previous_hidden', 'logit_stats', 'repetition', 'position', 'token'],
  rounds: 2,
  rolloutPrompts: 48,
  rolloutTokens: 48,
  // Full weight, as the demo routers were trained before the rollouts were weighted.
  rolloutWeight: 1,
} as const satisfies Partial<TrainRouterOptions>;
/** Routed shares whose thresholds (on the validation scores) the rollouts cycle through. */
export const ROLLOUT_SHARES = [0.1, 0.3, 0.5] as const;
/** A rollout prompt: the first tokens of a training paragraph, as in the evaluation's continuations. */
export const ROLLOUT_PREFIX_TOKENS = 16;

export interface TrainRouterOptions {
  edgeModel: string;
  /** The cloud pack, run in this process; or `cloud`, a running shim. Exactly one of the two. */
  cloudModel?: string;
  cloud?: ShimScorerOptions;
  /** The packs' ONNX files (hub folders hold several variants); `model.onnx` when omitted. */
  edgeModelFile?: string;
  cloudModelFile?: string;
  text: string;
  /** A chat dataset's template when not the edge pack's own: the edge's --chat-template (a Jinja file, or `chatml`). */
  chatTemplate?: string;
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
  /** Label rule of the on-policy records, which have no true text (defaultRolloutLabels(the dataset's kind) when not given). */
  rolloutLabels?: RolloutLabelRule;
  /** The groups the router reads, `hidden` included; defaultFeatures(the dataset's kind) when not given. */
  features?: readonly FeatureGroup[];
  /** On-policy rounds after the teacher-forced fit (0 = teacher forcing only, the first trainer's way). */
  rounds: number;
  /** Training prompts generated from per round (each greedily and sampled). */
  rolloutPrompts: number;
  rolloutTokens: number;
  /** An on-policy record's weight in the loss against a teacher-forced one's 1 (DEFAULT_ROLLOUT_WEIGHT when not given). */
  rolloutWeight?: number;
  /** Greedy edge tokens after a choice for the horizon labels (HORIZON_TOKENS when not given). */
  horizonTokens?: number;
  /** Nats each loop step in a horizon-nll branch costs (horizon-gain.ts chargeLoopSteps); when not given, loopCostShare(the dataset's kind) of the first round's median route gain. */
  loopCost?: number;
  /** `--force`: replace a router pack this project's tools wrote at `out` (output-ownership.ts). */
  force?: boolean;
  /** The held-out report after training (held-out-report.ts; the CLI's DEFAULT_REPORT); absent = none. */
  report?: ReportSettings;
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
  if (o.members !== undefined && (!Number.isInteger(o.members) || o.members < 1 || o.members > 16))
    bad(`--members must be an integer in [1, 16], got ${o.members}`);
  if (o.learningRate !== undefined && !(o.learningRate > 0 && o.learningRate <= 1)) bad(`--learning-rate must be in (0, 1], got ${o.learningRate}`);
  if (!LABEL_RULES.includes(o.labels)) bad(`--labels must be one of ${LABEL_RULES.join(', ')}, got ${JSON.stringify(o.labels)}`);
  if (o.rolloutLabels !== undefined && !ROLLOUT_LABEL_RULES.includes(o.rolloutLabels))
    bad(`--rollout-labels must be one of ${ROLLOUT_LABEL_RULES.join(', ')}, got ${JSON.stringify(o.rolloutLabels)}`);
  if (o.features && (!o.features.includes('hidden') || o.features.some((f) => !FEATURE_GROUPS.includes(f)))) {
    bad(`--features must be a comma-separated list of ${FEATURE_GROUPS.join(', ')} including hidden, got ${JSON.stringify(o.features.join(','))}`);
  }
  if (!Number.isInteger(o.rounds) || o.rounds < 0 || o.rounds > 10) bad(`--rounds must be an integer in [0, 10], got ${o.rounds}`);
  if (!Number.isInteger(o.rolloutPrompts) || o.rolloutPrompts < 1 || o.rolloutPrompts > 100_000) {
    bad(`--rollout-prompts must be an integer in [1, 100000], got ${o.rolloutPrompts}`);
  }
  if (!Number.isInteger(o.rolloutTokens) || o.rolloutTokens < 1 || o.rolloutTokens > 4096)
    bad(`--rollout-tokens must be an integer in [1, 4096], got ${o.rolloutTokens}`);
  if (o.rolloutWeight !== undefined && !(o.rolloutWeight > 0 && o.rolloutWeight <= 1)) bad(`--rollout-weight must be in (0, 1], got ${o.rolloutWeight}`);
  if (o.horizonTokens !== undefined && (!Number.isInteger(o.horizonTokens) || o.horizonTokens < 0 || o.horizonTokens > 64))
    bad(`--horizon-tokens must be an integer in [0, 64], got ${o.horizonTokens}`);
  if (o.loopCost !== undefined && !(o.loopCost >= 0 && o.loopCost <= 100)) bad(`--loop-cost must be in [0, 100] nats, got ${o.loopCost}`);
  // Without --rollout-labels the rule is the dataset's kind's, checked once the dataset is read.
  if (o.rolloutLabels !== undefined) validateRolloutRule(o, o.rolloutLabels);
  if (o.defaultThreshold !== undefined && !(o.defaultThreshold >= 0 && o.defaultThreshold <= 1)) {
    bad(`default threshold must be in [0, 1], got ${o.defaultThreshold}`);
  }
  for (const [flag, value] of [
    ['documents', o.report?.documents],
    ['prompts', o.report?.prompts],
    ['loop-prompts', o.report?.loopPrompts],
    ['tokens', o.report?.maxNewTokens],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 0 && value <= 100_000))
      bad(`--report-${flag} must be an integer in [0, 100000], got ${value}`);
  }
  const temperature = o.report?.temperature;
  if (temperature !== undefined && !(temperature >= 0 && temperature <= 5)) bad(`--report-temperature must be in [0, 5], got ${temperature}`);
  if ((o.cloudModel === undefined) === (o.cloud === undefined)) bad('give the cloud as --cloud-model PACK or as --cloud HOST:PORT (one of them)');
  for (const pack of [o.edgeModel, o.cloudModel]) {
    if (pack !== undefined && resolve(pack) === resolve(o.out)) bad(`--out ${o.out} would replace the model pack ${pack}`);
  }
}

/**
 * The flags that only some rollout rules read, against the rule in force: given, or the dataset's kind's
 * default (defaultRolloutLabels), which is known once the dataset is read, still before anything is trained.
 */
export function validateRolloutRule(o: Pick<TrainRouterOptions, 'horizonTokens' | 'loopCost' | 'rolloutLabels'>, rule: RolloutLabelRule): void {
  const given = o.rolloutLabels === undefined ? ` (the default for this dataset; give --rollout-labels to choose another)` : '';
  if (o.horizonTokens !== undefined && !readsHorizon(rule))
    throw new AppError(
      'INVALID_ARGUMENT',
      `--horizon-tokens applies to --rollout-labels horizon-nll, horizon-loop-nll and horizon-loop-guard-nll only, got --rollout-labels ${rule}${given}`,
    );
  if (o.loopCost !== undefined && rule !== 'horizon-nll')
    throw new AppError('INVALID_ARGUMENT', `--loop-cost applies to --rollout-labels horizon-nll only, got --rollout-labels ${rule}${given}`);
}
