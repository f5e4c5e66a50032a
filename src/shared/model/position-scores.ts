/**
 * Teacher forcing's arithmetic over a sequence's forward passes: from the logits of every position, the
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
import { eventLoopTurn } from '../process/event-loop-turn.ts';

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

/**
 * Tokens per forward pass of a scored sequence. The passes run on one KV cache, so the figures are those
 * of a single pass up to rounding, and every caller cuts at the same places so the shim's and the
 * in-process figures still agree to the bit. Small enough that a routed step waiting behind one pass on
 * the shim's cores waits little (score-sequence.ts), large enough to keep a prefill's batching.
 */
export const SCORE_CHUNK_TOKENS = 16;

/** Logit values scored between two yields to the event loop: what a routed step's message may wait behind. */
const SCORED_VALUES_PER_YIELD = 1 << 16;

/** Waits for leave to run one chunk, its pass and its rows (the shim's step admission); resolves to its release. */
export type ScoreTurn = () => Promise<() => void>;

/**
 * `model` over `ids` on a cache of its own (dropped after), SCORE_CHUNK_TOKENS at a time, scored as
 * `scoreRows` does. Each chunk waits for `turn` when given; between groups of rows, the event loop runs
 * what is waiting (a routed step's message on the shim).
 */
export async function scoreOnModel(model: DecoderModel, ids: readonly number[], options: ScoreRowsOptions = {}, turn?: ScoreTurn): Promise<PositionScores[]> {
  const { vocabSize } = model.pack;
  const rowsPerYield = Math.max(1, Math.floor(SCORED_VALUES_PER_YIELD / vocabSize));
  const sequence = model.newSequence();
  try {
    const positions: PositionScores[] = [];
    // Position i reads ids[0..i] and predicts ids[i + 1]: the last id is never fed.
    for (let from = 0; from + 1 < ids.length; from += SCORE_CHUNK_TOKENS) {
      const to = Math.min(from + SCORE_CHUNK_TOKENS, ids.length - 1);
      const release = await turn?.();
      try {
        const logits = (await sequence.append(ids.slice(from, to), { allPositions: true })).allLogits!;
        for (let row = from; row < to; row += rowsPerYield) {
          await eventLoopTurn();
          const end = Math.min(row + rowsPerYield, to);
          const rows = logits.subarray((row - from) * vocabSize, (end - from) * vocabSize);
          positions.push(...scoreRows(rows, vocabSize, ids.slice(row, end + 1), { ...options, candidates: options.candidates?.slice(row, end) }));
        }
      } finally {
        release?.();
      }
    }
    return positions;
  } finally {
    sequence.dispose();
  }
}
