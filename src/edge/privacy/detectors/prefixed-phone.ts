/**
 * Phone numbers written with a country prefix, `+` or the international call prefix `00`, whose digits are a
 * possible length for that country's numbers, whether or not the range is allocated: a mistyped or unassigned
 * number (`+44 7648 198702`) is still someone's private number to a reader. The country calling code must be a
 * real one. Where more digit groups follow, the number is the longest run of whole groups of a possible length
 * (`+44 7648 198702 12 people`). `00` numbers need a space or sign between groups, since a run of digits that
 * starts with 00 is more often a code or a serial number.
 *
 * @example
 * findPrefixedPhones('call +44 7648 198702 or 0044 20 7946 0958'); // [{ start: 5, end: 20 }, { start: 24, end: 41 }]
 */
import { validatePhoneNumberLength } from 'libphonenumber-js/max';
import { LinearPattern, type TextSpan } from '../linear-pattern.ts';

const CANDIDATE = LinearPattern.compile(String.raw`(?:\+|\b00)[\d ()\-./]*\d`);
/** What may stand between two digit groups: a space, a sign, parentheses, as people group numbers. */
const GROUP_SEPARATOR = /^(?: ?\(| ?[-./] ?| |\) ?[-.]? ?)$/;
/** What may stand between `+` and the first digit. */
const PREFIX_SEPARATOR = /^ ?\(?$/;
/** Shorter than this (calling code included) nothing is shaped like a phone number. */
const MIN_DIGITS = 7;
/** E.164's longest number, 15 digits, and the 00 before it: no more groups are read past this. */
const MAX_DIALLED_DIGITS = 17;

interface DigitGroup {
  digits: string;
  /** Where the group ends in the text. */
  end: number;
  /** A trunk prefix written in parentheses after the calling code, +44 (0)20: not dialled from abroad. */
  trunk: boolean;
}

export function findPrefixedPhones(text: string): TextSpan[] {
  const found: TextSpan[] = [];
  let from = 0;
  for (;;) {
    const candidate = CANDIDATE.spans(text, from).next();
    if (candidate.done) return found;
    const phone = phoneAt(text, candidate.value);
    if (phone !== undefined) found.push(phone);
    // A number cut short of its candidate may be followed by another: look again where it ends.
    from = phone?.end ?? candidate.value.end;
  }
}

function phoneAt(text: string, { start, end }: TextSpan): TextSpan | undefined {
  const international = text[start] === '+';
  // Glued to what comes before, it is part of something else: A+, 3+44, a date, a longer number. 00 after a
  // group of digits is one more group of that number (an account, an IBAN), not a prefix.
  if ((international ? /[\p{L}\p{N}+]/u : /[\p{L}\p{N}_.\-/:,]/u).test(text[start - 1] ?? '')) return undefined;
  if (!international && /\d[ .\-/]$/.test(text.slice(Math.max(0, start - 2), start))) return undefined;
  const groups = digitGroups(text, start, end, international);
  for (let count = groups.length; count >= (international ? 1 : 2); count--) {
    const dialled = groups
      .slice(0, count)
      .filter((g) => !g.trunk)
      .map((g) => g.digits)
      .join('');
    const number = international ? dialled : dialled.slice(2);
    if (!international && !dialled.startsWith('00')) return undefined;
    if (number.length < MIN_DIGITS) return undefined;
    if (!/^[1-9]/.test(number)) return undefined;
    const groupEnd = groups[count - 1].end;
    if (count === groups.length && /[\p{L}\p{N}_]/u.test(text[groupEnd] ?? '')) return undefined;
    if (validatePhoneNumberLength(`+${number}`) === undefined) return { start, end: groupEnd };
  }
  return undefined;
}

/** The candidate's digit groups up to the first separator no one writes inside a phone number. */
function digitGroups(text: string, start: number, end: number, international: boolean): DigitGroup[] {
  const candidate = text.slice(start, end);
  const groups: DigitGroup[] = [];
  let previousEnd = international ? 1 : 0;
  let digits = 0;
  for (const match of candidate.matchAll(/\d+/g)) {
    const separator = candidate.slice(previousEnd, match.index);
    if (!(groups.length === 0 ? PREFIX_SEPARATOR : GROUP_SEPARATOR).test(separator)) break;
    digits += match[0].length;
    if (digits > MAX_DIALLED_DIGITS) break;
    const trunk = groups.length === 1 && match[0] === '0' && separator.endsWith('(') && candidate[match.index + 1] === ')';
    groups.push({ digits: match[0], end: start + match.index + match[0].length, trunk });
    previousEnd = match.index + match[0].length;
  }
  return groups;
}
