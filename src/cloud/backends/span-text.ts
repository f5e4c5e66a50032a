/**
 * The text of a generated span as it continues the context: decoded together with a few context tokens
 * before it, so leading spaces and multi-token characters come out as they will in the full text.
 */
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

const WINDOW = 4;

export function spanText(tokenizer: TextTokenizer, context: readonly number[], span: readonly number[]): string {
  try {
    const tail = context.slice(-WINDOW);
    if (tail.length === 0) return tokenizer.decode(span);
    const before = tokenizer.decode(tail);
    const after = tokenizer.decode([...tail, ...span]);
    return after.startsWith(before) ? after.slice(before.length) : tokenizer.decode(span);
  } catch {
    // Ids the tokenizer does not know (a model with padded vocabulary): the text is informational only.
    return '';
  }
}
