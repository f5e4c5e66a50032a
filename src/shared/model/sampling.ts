/**
 * Token selection from logits: greedy at temperature 0, otherwise temperature-scaled softmax restricted
 * to the top-p nucleus, drawn with a caller-supplied (seeded) generator so runs are reproducible.
 */
import { argmax } from './logits.ts';

export interface SamplingOptions {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 keeps the whole vocabulary. */
  topP: number;
  /** Uniform [0, 1) generator; only used when temperature > 0. */
  random: () => number;
  /**
   * Only ids below this are chosen. Exports pad the embedding beyond the tokenizer's vocabulary
   * (Qwen: 151,936 rows, 151,669 tokens); a padded id has no text, so it must never be picked.
   */
  vocabLimit?: number;
}

export function sampleToken(allLogits: Float32Array, options: SamplingOptions): number {
  const logits = options.vocabLimit && options.vocabLimit < allLogits.length ? allLogits.subarray(0, options.vocabLimit) : allLogits;
  if (options.temperature === 0) return argmax(logits);
  const inv = 1 / options.temperature;
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]!);
  const weights = scratchWeights(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    weights[i] = Math.exp((logits[i]! - max) * inv);
    sum += weights[i]!;
  }
  if (options.topP >= 1) return drawFrom(weights, sum, options.random);
  const kept = nucleus(weights, options.topP * sum);
  const r = options.random() * kept.mass;
  // The draw walks the nucleus in descending weight: the id where the running mass first exceeds r.
  return descendingPrefix(kept.ids.slice(0, kept.count), weights, (mass) => mass > r).last;
}

/**
 * The smallest prefix of the ids in descending weight (ties by id) whose mass reaches `target`. The
 * nucleus is a prefix of that order, so it lies among the ids of weight ≥ t for any t at which those
 * ids already hold `target`: only they are searched (a handful for a peaked distribution).
 */
function nucleus(weights: Float64Array, target: number): Prefix {
  // The largest logit's weight is exp(0): exactly 1, and no weight exceeds it.
  const max = 1;
  const candidates = scratchCandidates(weights.length);
  let count = 0;
  for (let bound = max * 1e-2; ; bound = bound > max * 1e-12 ? bound * 1e-2 : 0) {
    count = 0;
    let mass = 0;
    for (let i = 0; i < weights.length; i++) {
      if (weights[i]! >= bound) {
        candidates[count++] = i;
        mass += weights[i]!;
      }
    }
    if (mass >= target || bound === 0) break;
  }
  return descendingPrefix(candidates.subarray(0, count), weights, (mass) => mass >= target);
}

interface Prefix {
  /** The ids searched, reordered: the prefix is `ids[0, count)`. */
  ids: Int32Array;
  count: number;
  mass: number;
  /** The prefix's last id in descending-weight order. */
  last: number;
}

/**
 * The smallest prefix of `ids` in descending weight order, ties by id, whose mass satisfies `reached`
 * (or all of them), moved to the front of `ids`. Found by three-way partitions around a pivot weight, in
 * place, as quickselect does, instead of sorting: a flat distribution's nucleus holds most of a
 * 151,936-id vocabulary, and sorting it took longer than the model's decode step. Only a group of equal
 * weights is sorted, by id.
 */
function descendingPrefix(ids: Int32Array, weights: Float64Array, reached: (mass: number) => boolean): Prefix {
  let lo = 0;
  let hi = ids.length;
  let mass = 0;
  let last = ids[hi - 1]!;
  while (lo < hi) {
    const pivot = weights[ids[(lo + hi) >> 1]!]!;
    // [lo, above) heavier than the pivot, [above, below) equal to it, [below, hi) lighter.
    let above = lo;
    let below = hi;
    let aboveMass = 0;
    for (let i = lo; i < below; ) {
      const id = ids[i]!;
      const w = weights[id]!;
      if (w > pivot) {
        ids[i++] = ids[above]!;
        ids[above++] = id;
        aboveMass += w;
      } else if (w < pivot) {
        ids[i] = ids[--below]!;
        ids[below] = id;
      } else i++;
    }
    if (above > lo && reached(mass + aboveMass)) {
      hi = above;
      continue;
    }
    mass += aboveMass;
    const equal = ids.subarray(above, below).sort();
    for (let k = 0; k < equal.length; k++) {
      mass += weights[equal[k]!]!;
      last = equal[k]!;
      if (reached(mass)) return { ids, count: above + k + 1, mass, last };
    }
    lo = below;
  }
  return { ids, count: lo, mass, last };
}

/**
 * The weights and the candidate ids live in buffers kept from call to call: sampling runs once a token, and
 * fresh arrays of the vocabulary's size (1.8 MB at 151,936 ids) cost their zero-fill and page faults every
 * time. sampleToken is synchronous and returns an id, never these buffers, so one pair serves every caller.
 */
let weightsBuffer = new Float64Array(0);
let candidatesBuffer = new Int32Array(0);

function scratchWeights(size: number): Float64Array {
  if (weightsBuffer.length < size) weightsBuffer = new Float64Array(size);
  return weightsBuffer.subarray(0, size);
}

function scratchCandidates(size: number): Int32Array {
  if (candidatesBuffer.length < size) candidatesBuffer = new Int32Array(size);
  return candidatesBuffer.subarray(0, size);
}

function drawFrom(weights: Float64Array, sum: number, random: () => number): number {
  let r = random() * sum;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return weights.length - 1;
}
