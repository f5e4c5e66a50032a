/**
 * The private values of one generation and their placeholders. A value is a string (a span a request
 * marked, an entity the box detected); every occurrence of it anywhere in the context, generated text
 * included, is private, and the cloud sees its placeholder instead. The same value keeps the same
 * placeholder for the whole generation (`[EMAIL_1]`, `[NAME_2]`): the cloud can still tell that two
 * mentions are one person.
 *
 * Collisions: a placeholder whose text already occurs in the prompt is skipped (`[EMAIL_1]` typed by the
 * user stays the user's text, the value becomes `[EMAIL_2]`), so that restoring never turns the user's own
 * text into a private value.
 *
 * @example
 * const values = PrivateValues.of([{ text: 'ann@example.org', kind: 'email' }], prompt);
 * values.list[0].placeholder;                 // '[EMAIL_1]'
 * values.privateRanges('mail ann@example.org'); // [{ start: 5, end: 20, values: [value] }]
 */
import { AppError } from '../../shared/errors.ts';

/** A private string of the request's, before it has a placeholder: its text and what kind of thing it is. */
export interface PrivateText {
  text: string;
  /** Lowercase: `email`, `phone`, `card`, `iban`, `ip`, an operator's kind, or `private` for a marked span. */
  kind: string;
}

export interface PrivateValue extends PrivateText {
  /** What the cloud reads instead, e.g. `[EMAIL_1]`. */
  placeholder: string;
}

/** Where a value occurs in a text (UTF-16 code units, `end` exclusive). */
export interface Occurrence {
  start: number;
  end: number;
  value: PrivateValue;
}

/** A stretch of text no character of which may leave: overlapping or touching occurrences, merged. */
export interface PrivateRange {
  start: number;
  end: number;
  /** The values occurring in it, by where they start (each once). */
  values: PrivateValue[];
}

/** Most distinct values one generation may hold: each costs a scan of the context per routed step. */
export const MAX_PRIVATE_VALUES = 256;
/** The longest private value: longer spans are documents, which belong on the box as a whole. */
export const MAX_PRIVATE_VALUE_CHARS = 1024;

export class PrivateValues {
  private constructor(
    readonly list: readonly PrivateValue[],
    /** Longest first: where two values start at one place, the longer is the one hidden. */
    private readonly byLength: readonly PrivateValue[],
    private readonly byPlaceholder: ReadonlyMap<string, PrivateValue>,
  ) {}

  /**
   * Placeholders for `texts` in order (the first value of a kind is `_1`); a text named twice is one
   * value. Whitespace around a text is not part of it. `promptText` is checked for collisions.
   */
  static of(texts: readonly PrivateText[], promptText: string): PrivateValues {
    const list: PrivateValue[] = [];
    const seen = new Set<string>();
    const counters = new Map<string, number>();
    for (const { text: raw, kind } of texts) {
      const text = raw.trim();
      if (text === '' || seen.has(text)) continue;
      if (text.length > MAX_PRIVATE_VALUE_CHARS) throw new AppError('INVALID_ARGUMENT', `a private span is ${text.length} characters; the limit is ${MAX_PRIVATE_VALUE_CHARS}`);
      seen.add(text);
      const label = kind.toUpperCase();
      let n = counters.get(label) ?? 0;
      let placeholder: string;
      do placeholder = `[${label}_${++n}]`;
      while (promptText.includes(placeholder));
      counters.set(label, n);
      list.push({ text, kind, placeholder });
    }
    if (list.length > MAX_PRIVATE_VALUES) throw new AppError('INVALID_ARGUMENT', `a request may hold at most ${MAX_PRIVATE_VALUES} distinct private values, got ${list.length}`);
    const byLength = [...list].sort((a, b) => b.text.length - a.text.length);
    return new PrivateValues(list, byLength, new Map(list.map((v) => [v.placeholder, v])));
  }

  get size(): number {
    return this.list.length;
  }

  /**
   * The characters of `text` that belong to some value, as merged ranges: where two values overlap
   * ("Ann Lee" and "Lee Park" in "Ann Lee Park") the whole stretch is private, not just the first.
   */
  privateRanges(text: string): PrivateRange[] {
    const ranges: PrivateRange[] = [];
    for (const o of scan(text, this.byLength, (v) => v.text)) {
      const last = ranges[ranges.length - 1];
      if (last && o.start <= last.end) {
        last.end = Math.max(last.end, o.end);
        if (!last.values.includes(o.value)) last.values.push(o.value);
      } else ranges.push({ start: o.start, end: o.end, values: [o.value] });
    }
    return ranges;
  }

  /** Every placeholder of this generation's in `text` (what the cloud wrote), left to right; placeholders never overlap. */
  placeholders(text: string): Occurrence[] {
    return scan(text, this.byLength, (v) => v.placeholder);
  }

  valueOf(placeholder: string): PrivateValue | undefined {
    return this.byPlaceholder.get(placeholder);
  }

  /**
   * Whether `text` ends with the start of a value but not all of it: the next tokens may complete it, so
   * what is at the end cannot be sent yet (it would leave in clear if they do).
   */
  endsInsideValue(text: string): boolean {
    return this.list.some((v) => endsWithProperPrefix(text, v.text));
  }

  /** Whether `text` ends with the start of a placeholder but not all of it: the cloud may be writing one. */
  endsInsidePlaceholder(text: string): boolean {
    return this.list.some((v) => endsWithProperPrefix(text, v.placeholder));
  }
}

/** Whether some non-empty proper prefix of `whole` ends `text`. */
function endsWithProperPrefix(text: string, whole: string): boolean {
  const longest = Math.min(whole.length - 1, text.length);
  // Only the last `longest` characters can matter; start where the first character of `whole` occurs.
  for (let at = text.length - longest; at < text.length; at++) {
    at = text.indexOf(whole[0]!, at);
    if (at < 0) return false;
    if (whole.startsWith(text.slice(at))) return true;
  }
  return false;
}

/** Every occurrence of every value's `key` in `text`, by start; at one start the longest first (the sort is stable). */
function scan(text: string, values: readonly PrivateValue[], key: (v: PrivateValue) => string): Occurrence[] {
  const found: Occurrence[] = [];
  for (const value of values) {
    const needle = key(value);
    for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) found.push({ start: at, end: at + needle.length, value });
  }
  return found.sort((a, b) => a.start - b.start);
}
