/**
 * The reference design's decoding method (She et al., ACL 2025 demo) as a baseline: its ONNX session got
 * only `input_ids`, so every token was computed by running the whole sequence (prompt + tokens so far)
 * again, with no KV cache.
 * Here each token gets a fresh sequence and one forward pass over that whole context, the same work.
 *
 * @example
 * const ms = await reprefillTokenMs(edgeModel, promptIds, generatedIds); // one time per generated token
 */
import type { DecoderModel } from '../../shared/model/decoder-model.ts';

/** Time to produce each of `ids` by recomputing prompt + the ids before it, in ms. */
export async function reprefillTokenMs(edgeModel: DecoderModel, promptIds: readonly number[], ids: readonly number[]): Promise<number[]> {
  const times: number[] = [];
  for (let j = 0; j < ids.length; j++) {
    const sequence = edgeModel.newSequence();
    try {
      const t = performance.now();
      await sequence.append([...promptIds, ...ids.slice(0, j)]);
      times.push(performance.now() - t);
    } finally {
      sequence.dispose();
    }
  }
  return times;
}
