/**
 * Router labels: 1 = keep the edge token, 0 = route it. Eight rules for human text, four of them (the
 * ones that need no true next token: ROLLOUT_LABEL_RULES) for the system's own trajectories; `loop-nll`,
 * their default, is below with `loopBreaks`.
 *
 * CITER's shortcut (no rollouts), against the true next token of human text:
 * - the edge model's top-1 is the true next token → 1 (the edge is right; routing only costs time);
 * - otherwise the cloud model's top-1 is right → 0 (routing fixes the token);
 * - both wrong → 1: under this criterion a route cannot fix the token, it only adds a round trip.
 *
 * Divergence (R2R-like, with the cloud as the reference instead of the text): route where the cloud
 * finds the edge's top-1 less than half as likely as its own top-1. It needs no true next token, so it
 * labels the system's own generated trajectories too (on-policy rounds), and it keeps near ties on the
 * edge, where the cloud itself is unsure and a route buys little. See docs/router-training.md.
 *
 * Gain (soft targets): the target is (1 − g) / 2, where g is what routing the position gains in top-1
 * agreement with the reference. `gain`: against the text, g = [cloud top-1 right] − [edge top-1 right]
 * ∈ {−1, 0, 1}. `cloud-gain`: against the cloud's distribution standing in for the text,
 * g = p_cloud(cloud top-1) − p_cloud(edge top-1) ∈ [0, 1], the expected value of the same difference if
 * the text were drawn from the cloud; it needs no text, so it labels rollouts too. Trained with
 * cross-entropy, the score estimates (1 − E[g]) / 2, and ranking positions by it is ranking them by what
 * routing them is expected to gain, which is what the at-share evaluation rewards. `mixed-gain`: the mean
 * of the two targets, as knowledge distillation mixes the hard label with the teacher's distribution.
 * The text's one next token is a noisy sample of what could follow; the cloud's probabilities say how
 * sure the gain is, and the text keeps what the cloud itself gets wrong in view.
 *
 * @example
 * divergenceLabel(0.05, 0.6); // 0: the cloud would rather say something else
 * gainTarget(0.05, 0.6);      // 0.225: routing is expected to gain 0.55 in agreement with the cloud
 */
import type { TeacherForced } from '../lab/forced-records.ts';
import type { HorizonReading } from './horizon-gain.ts';

/** cloud-nll's targets with the loop rules (Loops and Loop entries in docs/router-training.md). */
const LOOP_RULES = ['loop-nll', 'loop-guard-nll', 'loop-averse-nll', 'loop-neutral-nll'] as const;
export const LABEL_RULES = ['divergence', 'citer', 'gain', 'cloud-gain', 'mixed-gain', 'cloud-nll', 'mixed-nll', ...LOOP_RULES] as const;
export type LabelRule = (typeof LABEL_RULES)[number];
/** Rules whose targets are soft: their score estimates (1 − E[gain]) / 2, not P(keep). */
export const SOFT_LABEL_RULES: readonly LabelRule[] = ['gain', 'cloud-gain', 'mixed-gain', 'cloud-nll', 'mixed-nll', ...LOOP_RULES];
/** Rules for rollouts: those that need no true next token. */
export const ROLLOUT_LABEL_RULES = [
  'divergence',
  'cloud-gain',
  'cloud-nll',
  ...LOOP_RULES,
  'horizon-nll',
  'horizon-loop-nll',
  'horizon-loop-guard-nll',
] as const;
export type RolloutLabelRule = (typeof ROLLOUT_LABEL_RULES)[number];

/** Rules whose labels read what a route changes past the next token (horizon-gain.ts). */
export function readsHorizon(rule: LabelRule | RolloutLabelRule): boolean {
  return rule === 'horizon-nll' || rule === 'horizon-loop-nll' || rule === 'horizon-loop-guard-nll';
}

/** Route when p_cloud(edge top-1) < DIVERGENCE_RATIO · p_cloud(cloud top-1). */
export const DIVERGENCE_RATIO = 0.5;

export const LABEL_RULE_TEXT: Record<LabelRule | RolloutLabelRule, string> = {
  citer: 'citer-shortcut: 1 (keep) if the edge top-1 is correct or both are wrong; 0 (route) if only the cloud top-1 is correct',
  divergence: `divergence: 0 (route) if p_cloud(edge top-1) < ${DIVERGENCE_RATIO} * p_cloud(cloud top-1), else 1 (keep)`,
  gain: 'gain (soft): target (1 - g) / 2 with g = [cloud top-1 correct] - [edge top-1 correct]',
  'cloud-gain': 'cloud-gain (soft): target (1 - g) / 2 with g = p_cloud(cloud top-1) - p_cloud(edge top-1)',
  'mixed-gain': 'mixed-gain (soft): the mean of the gain and cloud-gain targets',
  'cloud-nll': 'cloud-nll (soft): target 1 / (2 (1 + g)) with g = ln p_cloud(cloud top-1) - ln p_cloud(edge top-1)',
  'mixed-nll': 'mixed-nll (soft): the mean of the gain and cloud-nll targets',
  'loop-nll': "loop-nll (soft): cloud-nll's target, but 0 (route) where the edge top-1 completes a 4-gram seen earlier and the cloud top-1 differs",
  'loop-guard-nll': "loop-guard-nll (soft): loop-nll's target, and 1 (keep) where the cloud top-1 completes a 4-gram seen earlier and the edge top-1 does not",
  'loop-averse-nll':
    "loop-averse-nll (soft): loop-nll's target, and 0.75 (a loss) where the cloud top-1 completes a 4-gram seen earlier and the edge top-1 does not",
  'loop-neutral-nll':
    "loop-neutral-nll (soft): loop-nll's target, and 0.5 (no gain) where the cloud top-1 completes a 4-gram seen earlier and the edge top-1 does not",
  'horizon-nll':
    "horizon-nll (soft, rollouts): loop-averse-nll's, with g the cloud's NLL of the edge's top-1 and the edge's greedy tokens after it less that of the cloud's top-1 and the edge's after it",
  'horizon-loop-nll':
    "horizon-loop-nll (soft, rollouts): horizon-nll's g, and 0.75 (keep) where the routed branch repeats more 4-grams than the kept one, 0 (route) where it repeats fewer",
  'horizon-loop-guard-nll':
    "horizon-loop-guard-nll (soft, rollouts): horizon-nll's g, and 1 (keep) where the routed branch repeats more 4-grams than the kept one, 0 (route) where it repeats fewer",
};

/** The CITER rule's text, as router.json has recorded it since the first trainer. */
export const LABEL_RULE = LABEL_RULE_TEXT.citer;

export function citerLabel(edgeCorrect: boolean, cloudCorrect: boolean): 0 | 1 {
  return !edgeCorrect && cloudCorrect ? 0 : 1;
}

export function divergenceLabel(cloudProbOfEdgeTop1: number, cloudTopProb: number): 0 | 1 {
  return cloudProbOfEdgeTop1 < DIVERGENCE_RATIO * cloudTopProb ? 0 : 1;
}

/** (1 − g) / 2 for a routing gain g in [−1, 1]: 1 = surely keep, 0 = surely route, 0.5 = routing changes nothing. */
export function gainTarget(cloudProbOfEdgeTop1: number, cloudTopProb: number): number {
  return (1 - (cloudTopProb - cloudProbOfEdgeTop1)) / 2;
}

/**
 * 1 / (2 (1 + g)) for g = ln p_cloud(cloud top-1) − ln p_cloud(edge top-1) ≥ 0: what routing the position
 * takes off the cloud's negative log-likelihood of the output (the free-running perplexity's own terms).
 * 0.5 where the two agree (routing changes nothing, as in the gain rules' scale, so the two kinds of
 * records mix), towards 0 as the edge's token gets less likely; unlike a probability
 * difference it still tells a token the cloud finds 100 times less likely from one it finds 10,000 times
 * less likely, which is where a free-running text's perplexity comes from. Probabilities are floored at
 * NLL_FLOOR so that a float32 zero stays finite.
 */
export function nllGainTarget(cloudProbOfEdgeTop1: number, cloudTopProb: number): number {
  const gain = Math.max(0, Math.log(Math.max(cloudTopProb, NLL_FLOOR)) - Math.log(Math.max(cloudProbOfEdgeTop1, NLL_FLOOR)));
  return 1 / (2 * (1 + gain));
}

/** Smallest probability the NLL gain reads (a float32 probability can underflow to 0). */
export const NLL_FLOOR = 1e-30;

export function citerLabels(forced: Pick<TeacherForced, 'count' | 'edgeCorrect' | 'cloudCorrect'>): Uint8Array {
  const labels = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) labels[i] = citerLabel(forced.edgeCorrect[i] === 1, forced.cloudCorrect[i] === 1);
  return labels;
}

export function divergenceLabels(forced: Pick<TeacherForced, 'count' | 'cloudProbOfEdgeTop1' | 'cloudTopProb'>): Uint8Array {
  const labels = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) labels[i] = divergenceLabel(forced.cloudProbOfEdgeTop1[i]!, forced.cloudTopProb[i]!);
  return labels;
}

/** Gain targets on human text: correctness stands in for the probabilities (a right top-1 has probability 1). */
export function textGainTargets(forced: Pick<TeacherForced, 'count' | 'edgeCorrect' | 'cloudCorrect'>): Float32Array {
  const targets = new Float32Array(forced.count);
  for (let i = 0; i < forced.count; i++) targets[i] = gainTarget(forced.edgeCorrect[i]!, forced.cloudCorrect[i]!);
  return targets;
}

/** Gain targets against the cloud's distribution (text or rollouts alike). */
export function cloudGainTargets(forced: Pick<TeacherForced, 'count' | 'cloudProbOfEdgeTop1' | 'cloudTopProb'>): Float32Array {
  const targets = new Float32Array(forced.count);
  for (let i = 0; i < forced.count; i++) targets[i] = gainTarget(forced.cloudProbOfEdgeTop1[i]!, forced.cloudTopProb[i]!);
  return targets;
}

/** NLL-gain targets against the cloud's distribution (text or rollouts alike). */
export function cloudNllTargets(forced: Pick<TeacherForced, 'count' | 'cloudProbOfEdgeTop1' | 'cloudTopProb'>): Float32Array {
  const targets = new Float32Array(forced.count);
  for (let i = 0; i < forced.count; i++) targets[i] = nllGainTarget(forced.cloudProbOfEdgeTop1[i]!, forced.cloudTopProb[i]!);
  return targets;
}

/** The mean of the text's and the cloud's gain targets (human text only: it needs the true next token). */
export function mixedGainTargets(forced: Pick<TeacherForced, 'count' | 'edgeCorrect' | 'cloudCorrect' | 'cloudProbOfEdgeTop1' | 'cloudTopProb'>): Float32Array {
  const text = textGainTargets(forced);
  const cloud = cloudGainTargets(forced);
  return text.map((t, i) => (t + cloud[i]!) / 2);
}

/** The mean of the text's gain targets and the cloud's NLL-gain targets (human text only). */
export function mixedNllTargets(forced: Pick<TeacherForced, 'count' | 'edgeCorrect' | 'cloudCorrect' | 'cloudProbOfEdgeTop1' | 'cloudTopProb'>): Float32Array {
  const text = textGainTargets(forced);
  const cloud = cloudNllTargets(forced);
  return text.map((t, i) => (t + cloud[i]!) / 2);
}

/**
 * Positions where the edge's top-1 would take a loop one step further (it completes a 4-gram seen earlier in
 * the sequence) and a route would write something else (the cloud's top-1 differs): `loop-nll` routes them.
 * cloud-nll weighs such a step only by how much less likely the cloud finds it than its own token, which
 * can be little once a loop is under way; what the free-running rep4 counts is the loop itself. Random
 * routing breaks loops by chance, which is why its output can repeat itself less than a router's.
 */
export function loopBreaks(forced: Pick<TeacherForced, 'count' | 'repeatsFourGram' | 'proposed' | 'cloudTop'>): Uint8Array {
  const breaks = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) breaks[i] = forced.repeatsFourGram[i] === 1 && forced.proposed[i] !== forced.cloudTop[i] ? 1 : 0;
  return breaks;
}

type LoopRecords = Pick<TeacherForced, 'count' | 'cloudProbOfEdgeTop1' | 'cloudTopProb' | 'repeatsFourGram' | 'cloudRepeatsFourGram' | 'proposed' | 'cloudTop'>;

/** `cloud-nll`'s targets and divergence's labels, both 0 (route) at the loop breaks. */
export function loopNllLabels(forced: Omit<LoopRecords, 'cloudRepeatsFourGram'>): { labels: Uint8Array; targets: Float32Array } {
  const labels = divergenceLabels(forced);
  const targets = cloudNllTargets(forced);
  loopBreaks(forced).forEach((loop, i) => {
    if (loop === 0) return;
    labels[i] = 0;
    targets[i] = 0;
  });
  return { labels, targets };
}

/**
 * Positions where a route would take a loop one step further and the edge's own token would not (the cloud's
 * top-1 completes a 4-gram seen earlier, the edge's does not): `loop-guard-nll` keeps them. Routing the most
 * likely tokens writes the text the cloud finds most likely, which repeats itself (greedy decoding's
 * degeneration): on a pair whose cloud loops as readily as its edge, a route can lead into a loop as often as
 * out of one.
 */
export function loopEntries(forced: Pick<TeacherForced, 'count' | 'repeatsFourGram' | 'cloudRepeatsFourGram'>): Uint8Array {
  const entries = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) entries[i] = forced.cloudRepeatsFourGram[i] === 1 && forced.repeatsFourGram[i] === 0 ? 1 : 0;
  return entries;
}

/**
 * `loop-nll`'s targets and labels, with "keep" at the loop entries: `loop-guard-nll` keeps them outright (target
 * 1), `loop-averse-nll` counts a route there as a loss (0.75), `loop-neutral-nll` as gaining nothing (0.5, as
 * where the two top-1s agree): what a route into a loop takes off the cloud's NLL it pays back in repetition.
 */
export function loopGuardNllLabels(forced: LoopRecords, entryTarget: 1 | 0.75 | 0.5): { labels: Uint8Array; targets: Float32Array } {
  const { labels, targets } = loopNllLabels(forced);
  loopEntries(forced).forEach((entry, i) => {
    if (entry === 0) return;
    labels[i] = 1;
    targets[i] = entryTarget;
  });
  return { labels, targets };
}

/**
 * cloud-nll's target extended to gains of either sign: 1 / (2 (1 + g)) for a route that gains, and the mirror
 * image, towards 1 (keep), for one that loses.
 */
export function horizonTarget(gain: number): number {
  return gain >= 0 ? 1 / (2 * (1 + gain)) : 1 - 1 / (2 * (1 - gain));
}

/** `loop-averse-nll`'s labels and loop targets; elsewhere the target of the gain over the horizon (horizon-gain.ts). */
export function horizonNllLabels(forced: LoopRecords, { gains }: HorizonReading): { labels: Uint8Array; targets: Float32Array } {
  const { labels, targets } = loopGuardNllLabels(forced, 0.75);
  const breaks = loopBreaks(forced);
  const entries = loopEntries(forced);
  for (let i = 0; i < forced.count; i++) if (breaks[i] === 0 && entries[i] === 0) targets[i] = horizonTarget(gains[i]!);
  return { labels, targets };
}

/**
 * The loop rules over the horizon: where the routed branch (the cloud's token and the edge's after it) takes
 * loops further more often than the kept one, the route is kept: `horizon-loop-nll` counts it as a loss (0.75),
 * as `loop-averse-nll` counts a route into a loop, `horizon-loop-guard-nll` keeps it outright (1), as
 * `loop-guard-nll` does; where less often, it is routed (0), as `loop-nll` routes a loop's next step.
 * Elsewhere the target of the gain over the horizon.
 */
export function horizonLoopNllLabels(forced: LoopRecords, horizon: HorizonReading, keepTarget: 0.75 | 1): { labels: Uint8Array; targets: Float32Array } {
  const labels = divergenceLabels(forced);
  const targets = Float32Array.from(horizon.gains, horizonTarget);
  for (let i = 0; i < forced.count; i++) {
    const kept = horizon.keptRepeats[i]!;
    const routed = horizon.routedRepeats[i]!;
    if (routed > kept) [labels[i], targets[i]] = [1, keepTarget];
    else if (kept > routed) [labels[i], targets[i]] = [0, 0];
  }
  return { labels, targets };
}

/**
 * A rule's labels: `labels` are binary (what AUC and accuracy are measured against), `targets` what the
 * cross-entropy is trained towards (the labels themselves for the hard rules). The soft rules' binary
 * labels are those of the hard rule with the same reference: CITER's for `gain`, `mixed-gain` and `mixed-nll`,
 * divergence's for `cloud-gain`, `cloud-nll` and the `loop-…-nll` rules. Rollouts have no text, so only the ROLLOUT_LABEL_RULES apply to them.
 */
export function labelsFor(rule: LabelRule | RolloutLabelRule, forced: TeacherForced, horizon?: HorizonReading): { labels: Uint8Array; targets: Float32Array } {
  if (readsHorizon(rule)) {
    if (!horizon || horizon.gains.length !== forced.count) throw new Error(`internal: ${rule} labels need the horizon gains of every record`);
    if (rule === 'horizon-nll') return horizonNllLabels(forced, horizon);
    return horizonLoopNllLabels(forced, horizon, rule === 'horizon-loop-guard-nll' ? 1 : 0.75);
  }
  if (rule === 'loop-nll') return loopNllLabels(forced);
  if (rule === 'loop-guard-nll') return loopGuardNllLabels(forced, 1);
  if (rule === 'loop-averse-nll') return loopGuardNllLabels(forced, 0.75);
  if (rule === 'loop-neutral-nll') return loopGuardNllLabels(forced, 0.5);
  const labels = rule === 'citer' || rule === 'gain' || rule === 'mixed-gain' || rule === 'mixed-nll' ? citerLabels(forced) : divergenceLabels(forced);
  if (rule === 'gain') return { labels, targets: textGainTargets(forced) };
  if (rule === 'cloud-gain') return { labels, targets: cloudGainTargets(forced) };
  if (rule === 'cloud-nll') return { labels, targets: cloudNllTargets(forced) };
  if (rule === 'mixed-nll') return { labels, targets: mixedNllTargets(forced) };
  if (rule === 'mixed-gain') return { labels, targets: mixedGainTargets(forced) };
  return { labels, targets: Float32Array.from(labels) };
}

/** The binary labels of a rule. */
export function labelsBy(rule: LabelRule, forced: TeacherForced): Uint8Array {
  return labelsFor(rule, forced).labels;
}
