/**
 * Payment card numbers: 13 to 19 digits, whole groups of a run written with single spaces or dashes, that
 * validator's isCreditCard accepts (a known issuer's prefix and length, and the Luhn check digit), so a
 * mistyped number or 0000 0000 0000 0000 is not one.
 *
 * @example
 * findCards('Visa 4111 1111 1111 1111 exp 12/27'); // [{ start: 5, end: 24 }]
 */
import isCreditCard from 'validator/lib/isCreditCard';
import { LinearPattern, type TextSpan } from '../linear-pattern.ts';

const DIGIT_RUN = LinearPattern.compile(String.raw`\d+(?:[ -]\d+)*`);
const GROUP = /\d+/g;
const MIN_DIGITS = 13;
const MAX_DIGITS = 19;

export function findCards(text: string): TextSpan[] {
  const found: TextSpan[] = [];
  for (const run of DIGIT_RUN.spans(text)) {
    // Glued to a word (an order code, a version) the digits are something else.
    if (/[\w.-]/.test(text[run.start - 1] ?? '') || /\w/.test(text[run.end] ?? '')) continue;
    const groups = [...text.slice(run.start, run.end).matchAll(GROUP)].map((g) => ({ start: run.start + g.index, end: run.start + g.index + g[0].length }));
    // From each group, the longest window of whole groups that is a card; the next search starts after it.
    for (let i = 0; i < groups.length; ) {
      const card = longestCardFrom(text, groups, i);
      if (card === undefined) {
        i++;
        continue;
      }
      found.push(card);
      while (i < groups.length && groups[i].start < card.end) i++;
    }
  }
  return found;
}

function longestCardFrom(text: string, groups: readonly TextSpan[], first: number): TextSpan | undefined {
  let card: TextSpan | undefined;
  let digits = 0;
  for (let last = first; last < groups.length; last++) {
    digits += groups[last].end - groups[last].start;
    if (digits > MAX_DIGITS) break;
    const span = { start: groups[first].start, end: groups[last].end };
    if (digits >= MIN_DIGITS && isCreditCard(text.slice(span.start, span.end))) card = span;
  }
  return card;
}
