/**
 * Ids for a piece of text that continues a context, spelled as the edge's tokenizer spells it: what a
 * placeholder becomes on the wire and a restored value becomes in the edge's cache. Encoding the piece
 * alone is not enough with every tokenizer: SentencePiece's normalizer puts a word-start space before a
 * text's first word ("Tim" would come back " Tim" after a context). So the piece is encoded after a line
 * break, which every tokenizer keeps as its own token(s), and the ids of the line break are dropped;
 * the result is checked by decoding, and the piece alone is the fallback when the check fails.
 *
 * @example
 * encodeContinuation(tokenizer, '[EMAIL_1]'); // ids that decode to '[EMAIL_1]' after any context
 */
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

const LEAD = '\n';

export function encodeContinuation(tokenizer: TextTokenizer, text: string): number[] {
  if (text === '') return [];
  const options = { addBos: false, parseSpecialTokens: false } as const;
  const ids = tokenizer.encode(LEAD + text, options);
  for (let cut = 1; cut < ids.length; cut++) {
    const lead = tokenizer.decode(ids.slice(0, cut));
    if (!lead.endsWith(LEAD)) continue;
    if (tokenizer.decode(ids) === lead + text) return ids.slice(cut);
    break;
  }
  return tokenizer.encode(text, options);
}
