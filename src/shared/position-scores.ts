/**
 * Teacher forcing's arithmetic over one forward pass: from the logits of every position of a sequence, the
 * log-probability of the next id, of a candidate id, and the top-k, per position. The shim's embedded
 * backend answers Score calls with it and the tools' in-process cloud uses it, so a router trained through a
 * shim and one trained in process see the same figures. Each log-probability is rounded to float32, the
 * width the contract carries it in, so the two paths agree to the bit rather than to a tolerance.
 *
 * @example
 * await scoreOnModel(model, ids, { candidates: proposals, topK: 1 }); // or scoreRows over logits you have
 * // [{ nextLogprob: -2.3, candidateLogprob: -0.4, topIds: [403], topLogprobs: [-0.4] }, ...]
 */
import type { DecoderModel } from './decoder-model.ts';
import { logSoftmax, topK as largest } from './logits.ts';

export interface PositionScores {
  nextLogprob: number;
  /** 0 when no candidates were asked for. */
  candidateLogprob: number;
  topIds: number[];
  topLogprobs: number[];
}

export interface ScoreRowsOptions {
  /** Per position i < ids.length - 1, the id whose log-probability to return. */
  candidates?: readonly number[];
  topK?: number;
  /** Ids at or above it are out of the top-k and the normalisation (the rows two padded vocabularies share). */
  vocabLimit?: number;
}

/**
 * `logits` holds `rowWidth` values per position of `ids`; positions 0 .. ids.length - 2 are scored (the last
 * one predicts a token the sequence does not have).
 */
export function scoreRows(logits: Float32Array, rowWidth: number, ids: readonly number[], options: ScoreRowsOptions = {}): PositionScores[] {
  const { candidates, topK = 0 } = options;
  const width = Math.min(rowWidth, options.vocabLimit ?? rowWidth);
  const positions: PositionScores[] = [];
  for (let i = 0; i + 1 < ids.length; i++) {
    const log = logSoftmax(logits.subarray(i * rowWidth, i * rowWidth + width));
    const top = largest(log, topK);
    const logprobOf = (id: number) => Math.fround(id < width ? log[id]! : -Infinity);
    positions.push({
      nextLogprob: logprobOf(ids[i + 1]!),
      candidateLogprob: candidates ? logprobOf(candidates[i]!) : 0,
      topIds: top.map((t) => t.id),
      topLogprobs: top.map((t) => Math.fround(t.value)),
    });
  }
  return positions;
}

/** One forward pass of `model` over `ids` on a cache of its own (dropped after), scored as `scoreRows` does. */
export async function scoreOnModel(model: DecoderModel, ids: readonly number[], options: ScoreRowsOptions = {}): Promise<PositionScores[]> {
  const sequence = model.newSequence();
  try {
    const out = await sequence.append(ids, { allPositions: true });
    return scoreRows(out.allLogits!, model.pack.vocabSize, ids, options);
  } finally {
    sequence.dispose();
  }
}
