/**
 * The text the built-in detectors read: the prompt with the characters that spell a value in another script or
 * width folded to ASCII (digits of any script, full-width forms such as `＠` and `４`, ideographic full stops,
 * every kind of space and hyphen), and invisible format characters (zero-width spaces, direction marks) left
 * out, so that `ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ`, `+٤٤ ٢٠ ٧٩٤٦ ٠٩٥٨` and an IBAN grouped with no-break spaces are
 * found as what they are. The detectors' offsets are mapped back, so a span always covers the text as typed.
 *
 * @example
 * const folded = foldForDetection('tel ٠٢٠ ٧٩٤٦');
 * folded.text; // 'tel 020 7946'
 * folded.originalSpan({ start: 4, end: 12 }); // { start: 4, end: 12 }
 */
import { decimalDigitValue } from '../decimal-digit.ts';
import type { TextSpan } from '../linear-pattern.ts';

export interface DetectionText {
  /** The text as typed. */
  readonly typed: string;
  /** The folded text (the same string when there was nothing to fold). */
  readonly text: string;
  /**
   * Where a span of the folded text lies in the original (UTF-16 units): from its first character to just after
   * its last, so characters left out around it are not part of it.
   */
  originalSpan(span: TextSpan): TextSpan;
}

// Each BMP character below folds to one ASCII character; digits are looked up separately.
const SPACE = /\p{Zs}/u;
const INVISIBLE = /\p{Cf}/u;
const DECIMAL_DIGIT = /\p{Nd}/u;
const DASHES = new Set([0x2010, 0x2011, 0x2012, 0x2013, 0x2212, 0xfe63]);
const FULL_STOPS = new Set([0x3002, 0xff61, 0xfe52]);
const SMALL_AT = 0xfe6b;

/** The folded text, or the text itself (and identity offsets) when there is nothing to fold. */
export function foldForDetection(text: string): DetectionText {
  // Most prompts are plain ASCII: nothing to fold and no offsets to keep.
  if (!/[^\x00-\x7f]/.test(text)) return unchanged(text);
  const parts: string[] = [];
  // For each folded UTF-16 unit, where its character starts and ends in the original.
  const starts: number[] = [];
  const ends: number[] = [];
  let changed = false;
  for (let at = 0; at < text.length; ) {
    const codePoint = text.codePointAt(at)!;
    const width = codePoint > 0xffff ? 2 : 1;
    const folded = codePoint < 0x80 ? undefined : foldedCharacter(codePoint);
    if (folded === undefined) {
      parts.push(text.slice(at, at + width));
      starts.push(...(width === 2 ? [at, at] : [at]));
      ends.push(...(width === 2 ? [at + 2, at + 2] : [at + 1]));
    } else {
      changed = true;
      if (folded !== '') {
        parts.push(folded);
        starts.push(at);
        ends.push(at + width);
      }
    }
    at += width;
  }
  if (!changed) return unchanged(text);
  const startOf = Int32Array.from(starts);
  const endOf = Int32Array.from(ends);
  return { typed: text, text: parts.join(''), originalSpan: ({ start, end }) => ({ start: startOf[start], end: endOf[end - 1] }) };
}

function unchanged(text: string): DetectionText {
  return { typed: text, text, originalSpan: ({ start, end }) => ({ start, end }) };
}

/** What one non-ASCII code point folds to: one ASCII character, '' (left out), or undefined (kept as it is). */
function foldedCharacter(codePoint: number): string | undefined {
  // Full-width ASCII (U+FF01 to U+FF5E) is ASCII shifted by a constant.
  if (codePoint >= 0xff01 && codePoint <= 0xff5e) return String.fromCharCode(codePoint - 0xfee0);
  if (DASHES.has(codePoint)) return '-';
  if (FULL_STOPS.has(codePoint)) return '.';
  if (codePoint === SMALL_AT) return '@';
  const character = String.fromCodePoint(codePoint);
  if (SPACE.test(character)) return ' ';
  if (INVISIBLE.test(character)) return '';
  if (DECIMAL_DIGIT.test(character)) return String(decimalDigitValue(codePoint));
  return undefined;
}
