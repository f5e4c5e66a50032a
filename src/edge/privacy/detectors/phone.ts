/**
 * Phone numbers, by libphonenumber-js with its full ("max") metadata, so a number must be valid for its
 * country (a real area code and length, not merely a plausible digit count). Numbers written with `+` and a
 * country code are found for every country. Numbers written without `+` are looked for as numbers of
 * NATIONAL_PHONE_REGIONS, and kept only where they are written as the country writes them: the same digits
 * (the trunk prefix included) with the area code as one group, or run together with what follows it.
 * Without that check a date such as 2024-05-17 is a valid German number (0202 40517 without its 0).
 * Numbers written with `+` or `00` whose range is not allocated are added by prefixed-phone.ts where no valid
 * number overlaps them.
 *
 * @example
 * findPhones('call +44 20 7946 0958 or (650) 253-0000'); // [{ start: 5, end: 21 }, { start: 25, end: 39 }]
 */
import { findNumbers, type CountryCode } from 'libphonenumber-js/max';
import type { TextSpan } from '../linear-pattern.ts';
import { findPrefixedPhones } from './prefixed-phone.ts';

/**
 * The countries whose national writing (no `+`) is recognised. Each adds a pass over the text and a little
 * room for false matches; these four cover the labelled table (docs/privacy-detection.md).
 */
export const NATIONAL_PHONE_REGIONS: readonly CountryCode[] = ['US', 'GB', 'DE', 'FR'];

export function findPhones(text: string): TextSpan[] {
  const found = new Map<string, TextSpan>();
  for (const region of [undefined, ...NATIONAL_PHONE_REGIONS]) {
    for (const { number, startsAt, endsAt } of findNumbers(text, { defaultCountry: region, v2: true })) {
      const { mainEnd, end } = withoutCommaExtension(text, endsAt, number.ext);
      const written = text.slice(startsAt, mainEnd);
      const asFormatted = (formatted: string) =>
        writtenAs(written, number.ext === undefined ? formatted : formatted.slice(0, formatted.lastIndexOf(number.ext)));
      if (!written.startsWith('+') && !asFormatted(number.formatNational()) && !asFormatted(number.formatInternational())) continue;
      found.set(`${startsAt}:${end}`, { start: startsAt, end });
    }
  }
  const valid = [...found.values()];
  const possible = findPrefixedPhones(text).filter((p) => !valid.some((v) => v.start < p.end && p.start < v.end));
  return [...valid, ...possible];
}

/**
 * Where the number proper ends, and where the span ends. libphonenumber-js reads digits after a comma or
 * semicolon as an extension (a dialling pause): in prose, "+44 20 7946 0958, 10 people" is a number and then
 * something else, so such an extension is left out; one written with a word or sign (ext. 123, x12, #22) stays.
 */
function withoutCommaExtension(text: string, endsAt: number, extension: string | undefined): { mainEnd: number; end: number } {
  if (extension === undefined) return { mainEnd: endsAt, end: endsAt };
  const extensionStart = endsAt - extension.length;
  let mainEnd = extensionStart;
  while (mainEnd > 0 && !/[\d)]/.test(text[mainEnd - 1])) mainEnd--;
  const separatedByPauseOnly = /^[\s,;]+$/.test(text.slice(mainEnd, extensionStart));
  return { mainEnd, end: separatedByPauseOnly ? mainEnd : endsAt };
}

/** Same digits as `formatted`, and the first written group is one or more whole groups of it. */
function writtenAs(written: string, formatted: string): boolean {
  const writtenGroups: string[] = written.match(/\d+/g) ?? [];
  const formattedGroups: string[] = formatted.match(/\d+/g) ?? [];
  if (writtenGroups.length === 0 || writtenGroups.join('') !== formattedGroups.join('')) return false;
  let length = 0;
  for (const group of formattedGroups) {
    length += group.length;
    if (length >= writtenGroups[0].length) return length === writtenGroups[0].length;
  }
  return false;
}
