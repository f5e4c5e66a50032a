/**
 * What `router train` reports: the figures of each round and of the final router, as text for the
 * terminal and as the `training` block of router.json.
 *
 * @example
 * console.log(formatTrainReport(await trainRouter(options)));
 */
import { relative, resolve } from 'node:path';
import type { RouterJson } from '../../edge/routing/router.ts';
import type { FeatureGroup } from '../../edge/routing/router-features.ts';
import { edgeModelIdentity } from '../../edge/routing/edge-model-identity.ts';
import type { TextCorpus } from '../lab/text-corpus.ts';
import { formatHeldOutReport, type HeldOutReport } from './held-out-report.ts';
import { HORIZON_TOKENS } from './horizon-gain.ts';
import { readsHorizon, LABEL_RULE_TEXT, type LabelRule, type RolloutLabelRule } from './labels.ts';
import { DEFAULT_MEMBERS, DEFAULT_ROLLOUT_WEIGHT, DEFAULT_ROUTER_LEARNING_RATE, VALIDATION_FRACTION, type TrainRouterOptions } from './train-router-options.ts';

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
  /** Documents: the text's paragraphs, or a chat dataset's conversations (then `chat` is present). */
  paragraphs: { train: number; validation: number; heldOut: number };
  /** A chat dataset: the lines of conversations without an assistant turn, left out. */
  chat?: { skippedLines: number[] };
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
  /** What horizon-nll charged each loop step in a branch, in nats (absent under another rollout rule). */
  loopCost?: number;
  /** The share of the median route gain it was worked out from, when `--loop-cost` was not given. */
  loopCostShare?: number;
  rounds: RoundReport[];
  /** The trained router against the baselines on held-out documents, when measured. */
  heldOut?: HeldOutReport;
  seconds: number;
}

/** router.json of a trained router: where its packs are, its default τ, its features and how it was trained. */
export function routerMeta(
  o: TrainRouterOptions,
  report: TrainRouterReport,
  packs: {
    edgeModelDir: string;
    cloudModelDir: string | undefined;
    cloud: string;
    hiddenSize: number;
    corpus: Pick<TextCorpus, 'path' | 'sha256'>;
    rolloutRule: RolloutLabelRule;
  },
): RouterJson {
  const { corpus, rolloutRule } = packs;
  const { defaultThreshold, rounds } = report;
  return {
    hidden_size: packs.hiddenSize,
    slm: relative(resolve(o.out), packs.edgeModelDir),
    // What the edge checks at start: this router on another edge model is refused.
    edge_model: edgeModelIdentity(packs.edgeModelDir),
    // A router trained through a shim names no pack: `router eval` then needs --cloud-model or --cloud.
    ...(packs.cloudModelDir === undefined ? {} : { llm: relative(resolve(o.out), packs.cloudModelDir) }),
    default_threshold: defaultThreshold,
    features: [...report.features],
    training: {
      // The shim it was trained through (the pack, when in process, is `llm` above).
      ...(packs.cloudModelDir === undefined ? { cloud: packs.cloud } : {}),
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
      // Only for a chat dataset, so routers trained on text keep the router.json they had.
      ...(report.chat ? { text_format: 'chat', skipped_conversation_lines: report.chat.skippedLines } : {}),
      hidden_units: o.hiddenUnits,
      members: o.members ?? DEFAULT_MEMBERS,
      learning_rate: o.learningRate ?? DEFAULT_ROUTER_LEARNING_RATE,
      rounds: rounds.map(roundJson),
      rollout_prompts: o.rolloutPrompts,
      rollout_tokens: o.rolloutTokens,
      // Only where there were rollouts to weigh (routers from before the weight weighed theirs 1).
      ...(o.rounds > 0 ? { rollout_weight: o.rolloutWeight ?? DEFAULT_ROLLOUT_WEIGHT } : {}),
      // Only where the rollouts' labels read a horizon, so other routers keep the router.json they had.
      ...(readsHorizon(rolloutRule) ? { horizon_tokens: o.horizonTokens ?? HORIZON_TOKENS } : {}),
      ...(report.loopCost === undefined ? {} : { loop_cost: report.loopCost }),
      ...(report.loopCostShare === undefined ? {} : { loop_cost_share: report.loopCostShare }),
      // What the page's about box and a user deciding between this router and --router builtin read.
      ...(report.heldOut ? { held_out_report: report.heldOut } : {}),
    },
  };
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
    r.chat
      ? `conversations: ${r.paragraphs.train} train, ${r.paragraphs.validation} validation, ${r.paragraphs.heldOut} held out (not trained on)${r.chat.skippedLines.length ? `; ${r.chat.skippedLines.length} without an assistant turn skipped` : ''}; records at the assistant's tokens only`
      : `paragraphs: ${r.paragraphs.train} train, ${r.paragraphs.validation} validation, ${r.paragraphs.heldOut} held out (not trained on)`,
    `examples: ${r.examples} (${r.trainExamples} train, ${r.validationExamples} validation); label balance ${r.labelBalance.toFixed(4)} keep / ${(1 - r.labelBalance).toFixed(4)} route`,
    `validation: AUC ${r.valAuc.toFixed(4)}, accuracy@0.5 ${r.valAccuracy.toFixed(4)} (label balance ${r.validationLabelBalance.toFixed(4)})`,
    `labels: ${r.labels}; features: ${r.features.join(', ')}`,
    ...r.rounds.map(formatRound),
    `epochs: ${r.epochsRun} run, best ${r.bestEpoch}; default threshold ${r.defaultThreshold}; ${r.seconds.toFixed(1)} s`,
    ...(r.heldOut ? [formatHeldOutReport(r.heldOut)] : []),
  ].join('\n');
}

function formatRound(r: RoundReport): string {
  const rollout = r.rollout
    ? `; rollouts: ${r.rollout.trajectories} trajectories, ${r.rollout.tokens} tokens, routed ${r.rollout.routedRatio.toFixed(3)}, greedy stuck ${r.rollout.greedyStuck}/${r.rollout.greedyOutputs}, rep4 ${r.rollout.greedyRep4.toFixed(3)}, +${r.added} records`
    : '';
  const onPolicy = r.onPolicyValAuc !== undefined ? `, on-policy AUC ${r.onPolicyValAuc.toFixed(4)} accuracy@0.5 ${r.onPolicyValAccuracy!.toFixed(4)}` : '';
  return `round ${r.round}: ${r.trainExamples} records; validation AUC ${r.valAuc.toFixed(4)} accuracy@0.5 ${r.valAccuracy.toFixed(4)}${onPolicy}${rollout}`;
}
