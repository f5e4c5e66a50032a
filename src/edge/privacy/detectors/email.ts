/**
 * Email addresses: email-regex-safe's pattern (its top-level domains checked against the real list, so
 * `logo@2x.png` is not an address), run on the linear-time engine because on a long run of word characters
 * JavaScript's engine takes quadratic time with it; each match then passes validator's isEmail.
 *
 * @example
 * findEmails('write to alice@example.com.'); // [{ start: 9, end: 26 }]
 */
import emailRegexSafe from 'email-regex-safe';
import isEmail from 'validator/lib/isEmail';
import { LinearPattern, type TextSpan } from '../linear-pattern.ts';

// Its TLD list makes a large program; that cost is fixed and measured (docs/privacy-detection.md), unlike an operator's.
const EMAIL = LinearPattern.compile(emailRegexSafe({ re2: false, gmail: false, localhost: false, ipv4: false, returnString: true }), {
  caseInsensitive: true,
  maxProgramSize: Infinity,
});

export function findEmails(text: string): TextSpan[] {
  const found: TextSpan[] = [];
  for (const span of EMAIL.spans(text)) {
    // The pattern stops at a known TLD even inside a longer word (logo@2x.pn|g); such a match is no address.
    if (/[\w-]/.test(text[span.end] ?? '')) continue;
    if (isEmail(text.slice(span.start, span.end))) found.push(span);
  }
  return found;
}
