/**
 * A pack's next-token figures on text, teacher-forced: its top-1 id at every position and its perplexity
 * of the text. What the quantizer's quality checks and the arm64 check compare between packs and machines
 * (agreement of the top-1 ids, ratio of the perplexities).
 *
 * @example
 * const { argmaxes, perplexity } = await nextTokenFigures(model, tokenizer, ['Once upon a time, ...']);
 */
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { argmax, logSumExp } from '../../shared/model/logits.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

export interface NextTokenFigures {
  /** The model's top-1 id after each position but the last of every paragraph, in order. */
  argmaxes: number[];
  /** exp of the mean negative log-likelihood of every token after the first (BOS). */
  perplexity: number;
}

export async function nextTokenFigures(model: DecoderModel, tokenizer: TextTokenizer, paragraphs: readonly string[]): Promise<NextTokenFigures> {
  const vocab = model.pack.vocabSize;
  const argmaxes: number[] = [];
  let nll = 0;
  for (const paragraph of paragraphs) {
    const ids = tokenizer.encode(paragraph, { addBos: true });
    const sequence = model.newSequence();
    const { allLogits } = await sequence.append(ids, { allPositions: true });
    sequence.dispose();
    for (let pos = 0; pos + 1 < ids.length; pos++) {
      const row = allLogits!.subarray(pos * vocab, (pos + 1) * vocab);
      nll += logSumExp(row) - row[ids[pos + 1]!]!;
      argmaxes.push(argmax(row));
    }
  }
  return { argmaxes, perplexity: Math.exp(nll / argmaxes.length) };
}
