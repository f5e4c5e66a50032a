/**
 * Numbers written as text (form fields, command-line flags) are read with one strict grammar: the "valid
 * floating-point number" of the HTML standard, which is what a number or range input submits. `Number()`
 * alone would take hex (`0x10`), padding (` 8 `), `Infinity` and the empty string (as 0).
 *
 * @example
 * parseDecimal('0.7');  // 0.7
 * parseDecimal('0x10'); // undefined
 */

/** No spaces, no hex, no `+`, no `Infinity` or `NaN`. */
export const DECIMAL_NUMBER = /^-?(\d+|\d*\.\d+)([eE][-+]?\d+)?$/;

/** The number `text` spells, or undefined when it is not a decimal number. */
export function parseDecimal(text: string): number | undefined {
  if (!DECIMAL_NUMBER.test(text)) return undefined;
  const n = Number(text);
  return Number.isFinite(n) ? n : undefined;
}
