/**
 * One forward pass over several sequences, each keeping its own KV cache: the rows' tokens and the
 * outputs are the same for both layouts, and the layout (kv-layout.ts) gathers the rows' caches into the
 * pass and gives each row its part back. Every row's tokens end at the pass's last position: a row
 * feeding fewer than the longest (the plain layout's appends of a few tokens) is padded before them,
 * and the layout masks the padding.
 *
 * @example
 * const results = await runBatchedPass(model, [{ sequence: a, tokens: [17] }, { sequence: b, tokens: [4] }]);
 * results[1].logits; // b's next-token logits
 */
import type { DecoderSequence } from './decoder-sequence.ts';
import type { AppendResult } from './decoder-types.ts';
import { AppError } from '../errors.ts';
import { float32Rows, indexTensor, logitRows } from './float-tensors.ts';
import type { KeptBatch } from './kept-batch.ts';
import type { KvCache, KvRow, LaidOutModel } from './kv-layout.ts';
import { ort, type OrtTensor } from './ort.ts';

export interface BatchRow {
  sequence: DecoderSequence;
  /** One token, several into a cache (plain layout), or a first prompt's tokens (the same count on every row). */
  tokens: readonly number[];
}

/** Runs the pass and records each row's tokens in its sequence; results in the order of `rows`. */
export async function runBatchedPass(model: LaidOutModel, rows: readonly BatchRow[], kept?: KeptBatch<KvRow>): Promise<AppendResult[]> {
  const { io, pack, layout } = model;
  const batch = rows.length;
  const counts = rows.map((r) => r.tokens.length);
  const n = Math.max(...counts);
  const lengths = rows.map((r) => r.sequence.length);
  const refusal = layout.rowsRefusal(counts, lengths);
  if (refusal) throw new AppError('INTERNAL', refusal);
  const longest = Math.max(...lengths);
  // Each row's tokens in the last of the n new slots; the slots before them (plain layout only) are masked.
  const fed = rows.flatMap((r) => [...new Array<number>(n - r.tokens.length).fill(r.tokens[0]!), ...r.tokens]);
  const feeds: Record<string, OrtTensor> = { input_ids: indexTensor(io.ids, fed, [batch, n]) };
  // As a lone append keeps them: the last position, and the one before for previousHidden.
  if (io.logitsToKeep) feeds.num_logits_to_keep = new ort.Tensor('int64', BigInt64Array.of(BigInt(Math.min(n, 2))), []);
  const shape = { lengths, counts, n, longest, total: longest + n };
  const sequences = rows.map((r) => r.sequence);
  return layout.runBatch(sequences, shape, feeds, kept, (out, present?: KvCache[]) => {
    const { vocabSize, hiddenSize } = pack;
    // Positions kept per row: every fed one, or the last num_logits_to_keep (hidden_states is cut alike where it is the head's input).
    const logitPositions = out.logits!.dims[1]!;
    const hiddenRows = out.hidden_states?.dims[1] ?? 0;
    const hiddenRow = (b: number, back: number) =>
      float32Rows(out.hidden_states!, ((b + 1) * hiddenRows - back) * hiddenSize, ((b + 1) * hiddenRows - back + 1) * hiddenSize);
    const results = rows.map((row, b): AppendResult => {
      const hidden = out.hidden_states ? hiddenRow(b, 1) : new Float32Array(0);
      const previousHidden = out.hidden_states && counts[b]! >= 2 ? hiddenRow(b, 2) : undefined;
      // onnxruntime-node starts a run on a later turn of the event loop, so a row's sequence may have been
      // disposed (its generation cancelled) meanwhile: the others' results stand, that row's are not kept.
      if (row.sequence.isDisposed) {
        for (const t of Object.values(present?.[b] ?? {})) layout.drop(t);
        return { logits: new Float32Array(0), hidden, previousHidden: previousHidden ?? hidden, batchSize: batch };
      }
      const before = row.sequence.record(row.tokens, present?.[b], hidden, previousHidden);
      const logits = logitRows(out.logits!, ((b + 1) * logitPositions - 1) * vocabSize, (b + 1) * logitPositions * vocabSize);
      return { logits, hidden, previousHidden: before, batchSize: batch };
    });
    for (const t of Object.values(out)) t.dispose();
    return results;
  });
}
