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
  for (const v of logits) max = Math.max(max, v);
  const weights = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    weights[i] = Math.exp((logits[i]! - max) * inv);
    sum += weights[i]!;
  }
  if (options.topP >= 1) return drawFrom(weights, sum, options.random);
  const order = nucleus(weights, options.topP * sum);
  let mass = 0;
  for (const id of order) mass += weights[id]!;
  let r = options.random() * mass;
  for (const id of order) {
    r -= weights[id]!;
    if (r < 0) return id;
  }
  return order[order.length - 1]!;
}

/**
 * The smallest prefix of the ids in descending weight (ties by id) whose mass reaches `target`. The
 * nucleus is a prefix of that order, so it lies among the ids of weight ≥ t for any t at which those
 * ids already hold `target`: only they are sorted (a handful, not a 151,936-entry vocabulary).
 */
function nucleus(weights: Float64Array, target: number): number[] {
  let max = 0;
  for (const w of weights) max = Math.max(max, w);
  let candidates: number[] = [];
  for (let bound = max * 1e-2; ; bound = bound > max * 1e-12 ? bound * 1e-2 : 0) {
    candidates = [];
    let mass = 0;
    for (let i = 0; i < weights.length; i++) {
      if (weights[i]! >= bound) {
        candidates.push(i);
        mass += weights[i]!;
      }
    }
    if (mass >= target || bound === 0) break;
  }
  candidates.sort((a, b) => weights[b]! - weights[a]! || a - b);
  let kept = 0;
  let mass = 0;
  while (kept < candidates.length && (kept === 0 || mass < target)) mass += weights[candidates[kept++]!]!;
  return candidates.slice(0, kept);
}

function drawFrom(weights: Float64Array, sum: number, random: () => number): number {
  let r = random() * sum;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return weights.length - 1;
}
