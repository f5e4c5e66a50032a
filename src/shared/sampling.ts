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
  // Candidates by descending probability until the nucleus mass is reached.
  const order = Array.from({ length: logits.length }, (_, i) => i).sort((a, b) => weights[b]! - weights[a]!);
  let kept = 0;
  let mass = 0;
  while (kept < order.length && (kept === 0 || mass < options.topP * sum)) mass += weights[order[kept++]!]!;
  let r = options.random() * mass;
  for (let i = 0; i < kept; i++) {
    r -= weights[order[i]!]!;
    if (r < 0) return order[i]!;
  }
  return order[kept - 1]!;
}

function drawFrom(weights: Float64Array, sum: number, random: () => number): number {
  let r = random() * sum;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return weights.length - 1;
}
