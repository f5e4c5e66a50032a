/**
 * The router's inputs beyond the hidden state, computed on the edge from what the decoding loop already
 * has: the edge model's logits at this position and the ids decoded so far. A router pack says which
 * groups it reads (`features` in router.json); a pack without the field reads the hidden state alone.
 *
 * - `logit_stats`: entropy of the edge distribution (nats), its top-1 probability, and the margin
 *   between the top-1 and top-2 probabilities. A wrong token is often a flat distribution.
 * - `repetition`: whether the edge's proposed token (its top-1) repeats the previous token, completes a
 *   bigram or a trigram seen earlier in the recent window, whether the two previous tokens are
 *   identical, and the share of distinct ids among the last 16. An edge model in a loop ("of of of")
 *   is confident and its hidden state looks ordinary; these say "loop" directly.
 * - `previous_hidden`: the edge's hidden state at the position before (zeros at the first). A cloud with
 *   more layers reads every earlier position through attention; the step just before is the one that
 *   tells most about where the text is going. router.onnx takes it as its own input,
 *   `previous_hidden_states`, concatenated after `hidden_states`.
 * - `position`: log(1 + the position's index in the sequence). The first tokens of a text are the
 *   hardest to guess, for both models, and their hidden states do not say how little context there is.
 * - `loop`: whether the proposed token completes a 4-gram seen earlier in the window (a loop's next step:
 *   what rep4 counts, and where the loop labels route), and the share of the last RECENT_SPAN ids that
 *   each completed a 4-gram seen before them (a loop under way). The repetition group stops at trigrams,
 *   which ordinary text completes often.
 * - `token`: the proposed token itself (the edge's top-1 id). router.onnx takes it as a third input,
 *   `proposed_token`, and adds that token's learned vector to its first layer: some tokens are wrong far
 *   more often than the edge's confidence in them says, and a one-hot input over the vocabulary would
 *   be as wide as the vocabulary.
 *
 * @example
 * const extra = extraFeatures(['logit_stats', 'repetition'], logits, context); // Float32Array(8)
 */

import { AppError } from '../../shared/errors.ts';

export const FEATURE_GROUPS = ['hidden', 'previous_hidden', 'logit_stats', 'repetition', 'position', 'token', 'loop'] as const;
export type FeatureGroup = (typeof FEATURE_GROUPS)[number];

/** Widths of the groups computed here (the hidden state's width is the model's). */
export const EXTRA_WIDTH = { logit_stats: 3, repetition: 5, position: 1, loop: 2 } as const;
/** How far back the repetition features look: enough for loops, constant cost however long the context. */
export const REPETITION_WINDOW = 64;
/** The span whose distinct-id share is a feature, and the evaluation's `stuck` window. */
export const RECENT_SPAN = 16;

/** The groups computed here, fed as `extra_features`: those with a width above (the hidden states are the model's, `token` is an id). */
export type ExtraGroup = keyof typeof EXTRA_WIDTH;

function isExtraGroup(group: FeatureGroup): group is ExtraGroup {
  return Object.hasOwn(EXTRA_WIDTH, group);
}

/** The `extra_features` groups, in the fixed order their values are concatenated. */
export function extraGroups(features: readonly FeatureGroup[]): ExtraGroup[] {
  return FEATURE_GROUPS.filter((g): g is ExtraGroup => isExtraGroup(g) && features.includes(g));
}

/** Whether the router reads the proposed token (the `token` group). */
export function readsToken(features: readonly FeatureGroup[]): boolean {
  return features.includes('token');
}

/** Whether the router reads the hidden state of the position before (the `previous_hidden` group). */
export function readsPreviousHidden(features: readonly FeatureGroup[]): boolean {
  return features.includes('previous_hidden');
}

/** The `position` value of the position at `index` (0 = the first token of the sequence). */
export function positionFeature(index: number): number {
  return Math.log1p(Math.max(0, index));
}

export function extraWidth(features: readonly FeatureGroup[]): number {
  return extraGroups(features).reduce((sum, g) => sum + EXTRA_WIDTH[g], 0);
}

/** Checks a `features` list read from router.json (undefined = hidden state only, as older packs). */
export function parseFeatureGroups(raw: unknown, where: string): FeatureGroup[] {
  if (raw === undefined) return ['hidden'];
  if (!Array.isArray(raw) || raw.length === 0 || raw.some((g) => !(FEATURE_GROUPS as readonly unknown[]).includes(g))) {
    throw new AppError('INVALID_ARGUMENT', `${where}: features must be a non-empty list of ${FEATURE_GROUPS.join(', ')}, got ${JSON.stringify(raw)}`);
  }
  if (!raw.includes('hidden')) throw new AppError('INVALID_ARGUMENT', `${where}: features must include hidden`);
  return FEATURE_GROUPS.filter((g) => raw.includes(g));
}

export interface LogitStats {
  entropy: number;
  top1: number;
  margin: number;
  argmax: number;
}

/** The largest and second-largest logit and the first index of the largest: one pass of comparisons, no exponentials. */
export function logitExtremes(logits: ArrayLike<number>): { max: number; second: number; argmax: number } {
  let max = -Infinity;
  let second = -Infinity;
  let argmax = 0;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    // Most entries are below the runner-up: one comparison each.
    if (v > second) {
      if (v > max) {
        second = max;
        max = v;
        argmax = i;
      } else second = v;
    }
  }
  return { max, second, argmax };
}

/** Z = Σ exp(x − max) and Σ exp(x − max)·(x − max), in JavaScript (the reference, and cheaper than a session run for short rows). */
export function logitSums(logits: ArrayLike<number>, max: number): { z: number; weighted: number } {
  let z = 0;
  let weighted = 0;
  for (let i = 0; i < logits.length; i++) {
    const d = logits[i]! - max;
    const e = Math.exp(d);
    z += e;
    weighted += e * d;
  }
  return { z, weighted };
}

/** Entropy (nats), top-1 probability and top-1 − top-2 margin from the extremes and the sums: H = log Z − Σ p·(x − max). */
export function statsFromSums(extremes: { max: number; second: number; argmax: number }, sums: { z: number; weighted: number }): LogitStats {
  const top1 = 1 / sums.z;
  const top2 = extremes.second === -Infinity ? 0 : Math.exp(extremes.second - extremes.max) / sums.z;
  return { entropy: Math.max(0, Math.log(sums.z) - sums.weighted / sums.z), top1, margin: top1 - top2, argmax: extremes.argmax };
}

/** Entropy (nats), top-1 probability, top-1 − top-2 probability, and the top-1 id, in two passes over the logits. */
export function logitStats(logits: ArrayLike<number>): LogitStats {
  const extremes = logitExtremes(logits);
  return statsFromSums(extremes, logitSums(logits, extremes.max));
}

/** Whether the n-gram ending with `next` after the last n−1 ids of `recent` occurred earlier in `recent`. */
export function completesSeenNgram(recent: readonly number[], next: number, n: number): boolean {
  const end = recent.length;
  if (end < n - 1) return false;
  // Candidate starts s: recent[s..s+n-2] equals the last n−1 ids and recent[s+n-1] equals next.
  for (let s = 0; s + n - 1 < end; s++) {
    if (recent[s + n - 1] !== next) continue;
    let same = true;
    for (let k = 0; k < n - 1 && same; k++) same = recent[s + k] === recent[end - (n - 1) + k];
    if (same) return true;
  }
  return false;
}

/**
 * The five repetition values for proposing `next` after `context` (only its last REPETITION_WINDOW ids
 * are read): repeats the previous id; completes a seen bigram; completes a seen trigram; the two previous
 * ids are identical; distinct ids among the last RECENT_SPAN (1 for fewer than two ids).
 */
export function repetitionFeatures(context: readonly number[], next: number): [number, number, number, number, number] {
  const recent = context.slice(Math.max(0, context.length - REPETITION_WINDOW));
  const n = recent.length;
  const last = recent[n - 1];
  const tail = recent.slice(Math.max(0, n - RECENT_SPAN));
  const distinct = tail.length < 2 ? 1 : new Set(tail).size / tail.length;
  return [
    last === next ? 1 : 0,
    completesSeenNgram(recent, next, 2) ? 1 : 0,
    completesSeenNgram(recent, next, 3) ? 1 : 0,
    n >= 2 && recent[n - 1] === recent[n - 2] ? 1 : 0,
    distinct,
  ];
}

/**
 * 1 at each id that ends a 4-gram equal to an earlier 4-gram of `ids`: the ids the evaluation's rep4 counts
 * (free-running-metrics.ts), and the loop group's share of a loop under way.
 */
export function repeatEnds(ids: readonly number[]): Uint8Array {
  const ends = new Uint8Array(ids.length);
  const seen = new Set<string>();
  for (let i = 0; i + 4 <= ids.length; i++) {
    const key = `${ids[i]},${ids[i + 1]},${ids[i + 2]},${ids[i + 3]}`;
    if (seen.has(key)) ends[i + 3] = 1;
    else seen.add(key);
  }
  return ends;
}

/**
 * The two loop values for proposing `next` after `context` (its last REPETITION_WINDOW ids): completes a
 * 4-gram seen earlier; the share of the last RECENT_SPAN ids that each completed a 4-gram seen before them.
 */
export function loopFeatures(context: readonly number[], next: number): [number, number] {
  const recent = context.slice(Math.max(0, context.length - REPETITION_WINDOW));
  const span = Math.min(RECENT_SPAN, recent.length);
  const repeats = repeatEnds(recent)
    .subarray(recent.length - span)
    .reduce((s, e) => s + e, 0);
  return [completesSeenNgram(recent, next, 4) ? 1 : 0, span === 0 ? 0 : repeats / span];
}

/**
 * Writes the extra feature values of one position into `out` (length `extraWidth(features)`), in
 * `extraGroups` order, from its logit statistics and the ids up to it (the repetition features read the
 * last REPETITION_WINDOW). `position` is its index in the sequence the model saw: by default
 * `context.length − 1`, for callers that pass the whole sequence.
 */
export function writeExtraFeatures(
  out: Float32Array,
  features: readonly FeatureGroup[],
  stats: LogitStats,
  context: readonly number[],
  position = context.length - 1,
): Float32Array {
  let k = 0;
  for (const group of extraGroups(features)) {
    if (group === 'logit_stats') {
      out[k] = stats.entropy;
      out[k + 1] = stats.top1;
      out[k + 2] = stats.margin;
    } else if (group === 'repetition') {
      out.set(repetitionFeatures(context, stats.argmax), k);
    } else if (group === 'loop') {
      out.set(loopFeatures(context, stats.argmax), k);
    } else {
      out[k] = positionFeature(position);
    }
    k += EXTRA_WIDTH[group];
  }
  return out;
}

/** The extra feature values of one position, in `extraGroups` order (empty for a hidden-only router). */
export function extraFeatures(features: readonly FeatureGroup[], logits: ArrayLike<number>, context: readonly number[]): Float32Array {
  const out = new Float32Array(extraWidth(features));
  if (out.length === 0) return out;
  return writeExtraFeatures(out, features, logitStats(logits), context);
}
