/**
 * IBANs: two letters and two check digits, then exactly the length ibantools' country table gives for that
 * country, in groups of any size split by spaces or dashes or not at all (no-break spaces arrive as spaces,
 * detection-text.ts), in either case, accepted only where ibantools' ISO 7064 mod-97 check holds: the checksum
 * keeps look-alikes out, so how it is written need not.
 *
 * @example
 * findIbans('IBAN DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX'); // [{ start: 5, end: 32 }]
 */
import { countrySpecs, isValidIBAN } from 'ibantools';
import { LinearPattern, type TextSpan } from '../linear-pattern.ts';

const SEPARATORS = ' -';
// Longer than any country's IBAN (34), so a candidate is cut to its country's length below.
const CANDIDATE = LinearPattern.compile(String.raw`\b[A-Za-z]{2}\d{2}(?:[ \-]?[A-Za-z0-9]){8,32}`);

export function findIbans(text: string): TextSpan[] {
  const found: TextSpan[] = [];
  let from = 0;
  for (;;) {
    const candidate = CANDIDATE.spans(text, from).next();
    if (candidate.done) return found;
    const { start, end } = candidate.value;
    const iban = ibanAt(text, start, end);
    if (iban !== undefined) found.push(iban);
    // A rejected candidate may hold the start of a real IBAN (XX12 DE89 ...): look again one past its start.
    from = iban?.end ?? start + 1;
  }
}

function ibanAt(text: string, start: number, end: number): TextSpan | undefined {
  const length = countrySpecs[text.slice(start, start + 2).toUpperCase()]?.chars;
  if (length === undefined) return undefined;
  let characters = 0;
  let at = start;
  while (at < end && characters < length) if (!SEPARATORS.includes(text[at++])) characters++;
  // Cut short, or running on into more letters and digits: not this country's IBAN.
  if (characters < length || /[A-Za-z0-9]/.test(text[at] ?? '')) return undefined;
  const electronic = text.slice(start, at).replace(/[ -]/g, '').toUpperCase();
  return isValidIBAN(electronic) ? { start, end: at } : undefined;
}
