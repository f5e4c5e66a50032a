/**
 * A decimal digit's value, in any script: what both the detectors (detection-text.ts) and the values' folding
 * (folded-text.ts) read `٤` and `४` as. Unicode encodes every script's digits as a run of ten, 0 to 9 in order (a
 * stability policy), and where two runs touch each is still whole: the distance from the start of the run,
 * modulo ten.
 *
 * @example
 * decimalDigitValue(0x0664); // 4 (ARABIC-INDIC DIGIT FOUR)
 */
const DECIMAL_DIGIT = /\p{Nd}/u;
const digitValues = new Map<number, number>();

export function decimalDigitValue(codePoint: number): number {
  const known = digitValues.get(codePoint);
  if (known !== undefined) return known;
  let first = codePoint;
  while (first > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(first - 1))) first--;
  const value = (codePoint - first) % 10;
  digitValues.set(codePoint, value);
  return value;
}
