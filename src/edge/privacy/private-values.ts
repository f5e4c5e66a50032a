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
import { FoldedText, foldString } from './folded-text.ts';

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

/** How values are matched: case folded on top of the rest (folded-text.ts) when the operator or the tokenizer says so. */
export interface MatchOptions {
  foldCase?: boolean;
}

/**
 * The shortest start of a value that counts as the value when the text turns away from it: half the value,
 * at least 4 folded characters ("ann@example." of "ann@example.org", "John" of "Johnson"), so that a value
 * begun and abandoned does not leave, while a common word that begins a value ("The" of "Theodore") does.
 */
const MIN_BEGUN_CHARS = 4;

function begunLength(folded: string): number {
  return Math.min(folded.length, Math.max(MIN_BEGUN_CHARS, Math.ceil(folded.length / 2)));
}

export class PrivateValues {
  private constructor(
    readonly list: readonly PrivateValue[],
    /** Longest first: where two values start at one place, the longer is the one hidden. */
    private readonly byLength: readonly PrivateValue[],
    private readonly byPlaceholder: ReadonlyMap<string, PrivateValue>,
    /** Each value's folded form, by value. */
    private readonly folded: ReadonlyMap<PrivateValue, string>,
    readonly foldCase: boolean,
  ) {}

  /**
   * Placeholders for `texts` in order (the first value of a kind is `_1`); a text named twice is one
   * value. Whitespace around a text is not part of it. `promptText` is checked for collisions.
   */
  static of(texts: readonly PrivateText[], promptText: string, options: MatchOptions = {}): PrivateValues {
    const foldCase = options.foldCase === true;
    const list: PrivateValue[] = [];
    const seen = new Set<string>();
    const counters = new Map<string, number>();
    const folded = new Map<PrivateValue, string>();
    for (const { text: raw, kind } of texts) {
      const text = raw.trim();
      if (text === '' || seen.has(text)) continue;
      if (text.length > MAX_PRIVATE_VALUE_CHARS)
        throw new AppError('INVALID_ARGUMENT', `a private span is ${text.length} characters; the limit is ${MAX_PRIVATE_VALUE_CHARS}`);
      seen.add(text);
      const label = kind.toUpperCase();
      let n = counters.get(label) ?? 0;
      let placeholder: string;
      do placeholder = `[${label}_${++n}]`;
      while (promptText.includes(placeholder));
      counters.set(label, n);
      const value = { text, kind, placeholder };
      list.push(value);
      // A value of nothing but marks or spaces folds to nothing: matched as written.
      folded.set(value, foldString(text, foldCase) || text);
    }
    if (list.length > MAX_PRIVATE_VALUES)
      throw new AppError('INVALID_ARGUMENT', `a request may hold at most ${MAX_PRIVATE_VALUES} distinct private values, got ${list.length}`);
    const byLength = [...list].sort((a, b) => folded.get(b)!.length - folded.get(a)!.length);
    return new PrivateValues(list, byLength, new Map(list.map((v) => [v.placeholder, v])), folded, foldCase);
  }

  get size(): number {
    return this.list.length;
  }

  /** The longest folded value: how far back a scan of a grown text must look. */
  get longestFolded(): number {
    return this.byLength.length === 0 ? 0 : this.folded.get(this.byLength[0]!)!.length;
  }

  /**
   * The characters of `text` that belong to some value, as merged ranges: where two values overlap
   * ("Ann Lee" and "Lee Park" in "Ann Lee Park") the whole stretch is private, not just the first. A value
   * is found in any spelling that folds like it (folded-text.ts), and so is a start of it that the text
   * turned away from (begunLength). From folded index `from` on: those that start there or later.
   */
  privateRanges(text: string | FoldedText, from = 0): PrivateRange[] {
    const folded = this.foldedOf(text);
    const ranges: PrivateRange[] = [];
    for (const o of this.occurrences(folded.text, from)) {
      const { start, end } = folded.rawRange(o.start, o.end);
      const last = ranges[ranges.length - 1];
      if (last && start <= last.end) {
        last.end = Math.max(last.end, end);
        if (!last.values.includes(o.value)) last.values.push(o.value);
      } else ranges.push({ start, end, values: [o.value] });
    }
    return ranges;
  }

  /**
   * The first value that a folded text discloses at or after folded index `from`: whole, begun, or (unless the
   * text is `complete`, like a request id, and no token will extend it) under way at its end.
   */
  disclosedIn(folded: string, from = 0, complete = false): PrivateValue | undefined {
    const found = this.occurrences(folded, from)[0]?.value;
    return found ?? (complete ? undefined : this.valueUnderWay(folded));
  }

  /** Every placeholder of this generation's in `text` (what the cloud wrote), left to right; placeholders never overlap. */
  placeholders(text: string): Occurrence[] {
    const found: Occurrence[] = [];
    for (const value of this.list) {
      for (let at = text.indexOf(value.placeholder); at >= 0; at = text.indexOf(value.placeholder, at + 1))
        found.push({ start: at, end: at + value.placeholder.length, value });
    }
    return found.sort((a, b) => a.start - b.start);
  }

  valueOf(placeholder: string): PrivateValue | undefined {
    return this.byPlaceholder.get(placeholder);
  }

  /**
   * Whether `text` ends with the start of a value but not all of it: the next tokens may complete it, so
   * what is at the end cannot be sent yet (it would leave in clear if they do).
   */
  endsInsideValue(text: string | FoldedText): boolean {
    return this.valueUnderWay(this.foldedOf(text).text) !== undefined;
  }

  /** A value whose start, and not all of it, ends the folded text. */
  private valueUnderWay(folded: string): PrivateValue | undefined {
    return this.list.find((v) => endsWithProperPrefix(folded, this.folded.get(v)!));
  }

  /** Whether `text` ends with the start of a placeholder but not all of it: the cloud may be writing one. */
  endsInsidePlaceholder(text: string): boolean {
    return this.list.some((v) => endsWithProperPrefix(text, v.placeholder));
  }

  private foldedOf(text: string | FoldedText): FoldedText {
    if (typeof text !== 'string') return text;
    const folded = new FoldedText(this.foldCase);
    folded.sync(text);
    return folded;
  }

  /**
   * Where values occur in a folded text from folded index `from` on, by start (at one start the longest
   * first): whole, or begun for at least begunLength characters and then left (or cut off by the end).
   */
  private occurrences(folded: string, from: number): { start: number; end: number; value: PrivateValue }[] {
    const found: { start: number; end: number; value: PrivateValue }[] = [];
    for (const value of this.byLength) {
      const whole = this.folded.get(value)!;
      const head = whole.slice(0, begunLength(whole));
      for (let at = folded.indexOf(head, from); at >= 0; at = folded.indexOf(head, at + 1)) {
        let matched = head.length;
        while (matched < whole.length && folded[at + matched] === whole[matched]) matched++;
        found.push({ start: at, end: at + matched, value });
      }
    }
    return found.sort((a, b) => a.start - b.start);
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
