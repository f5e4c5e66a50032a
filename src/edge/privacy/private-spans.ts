/**
 * What a request marks private: `private_spans`, a list of `[start, end)` ranges of a text in Unicode code
 * points (what a person counts, and what JSON, protobuf and the page agree on; UTF-16 units would cut an
 * emoji), each `[start, end]`, `[start, end, kind]` or `{start, end, kind}`. Checked strictly: ranges
 * inside the text, in order, not overlapping, a kind spelled as a placeholder can carry it. The text under
 * each range becomes a private value (private-values.ts).
 *
 * @example
 * readPrivateSpans([[11, 26, 'email']], 'write to  ann@example.org', 'private_spans');
 * // [{ text: 'ann@example.org', kind: 'email' }]
 */
import { AppError } from '../../shared/errors.ts';
import type { PrivateText } from './private-values.ts';

export interface PrivateSpan {
  start: number;
  end: number;
  kind?: string;
}

/** The kind of a span that names none: its placeholder is `[PRIVATE_1]`. */
export const MARKED_KIND = 'private';
/** A kind as a placeholder spells it: lowercase here, uppercase in `[EMAIL_1]`. */
export const KIND_NAME = /^[a-z][a-z0-9_]{0,15}$/;
/** Most spans one text may mark. */
export const MAX_PRIVATE_SPANS = 256;

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

/** One span as a request writes it, checked for shape; `at` names it in errors. */
function readSpan(raw: unknown, at: string): PrivateSpan {
  let start: unknown, end: unknown, kind: unknown;
  if (Array.isArray(raw) && (raw.length === 2 || raw.length === 3)) [start, end, kind] = raw;
  else if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const fields = raw as Record<string, unknown>;
    const extra = Object.keys(fields).filter((k) => k !== 'start' && k !== 'end' && k !== 'kind');
    if (extra.length > 0) invalid(`${at} has an unknown field ${JSON.stringify(extra[0])}; a span is {start, end, kind}`);
    ({ start, end, kind } = {
      start: Object.hasOwn(fields, 'start') ? fields.start : undefined,
      end: Object.hasOwn(fields, 'end') ? fields.end : undefined,
      kind: Object.hasOwn(fields, 'kind') ? fields.kind : undefined,
    });
  } else invalid(`${at} must be [start, end], [start, end, kind] or {start, end, kind}, got ${JSON.stringify(raw)}`);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end))
    invalid(`${at}: start and end must be integers (code points), got ${JSON.stringify([start, end])}`);
  if (kind !== undefined && kind !== null && kind !== '' && (typeof kind !== 'string' || !KIND_NAME.test(kind))) {
    invalid(`${at}: kind must be lowercase letters, digits and _ (at most 16, a letter first), got ${JSON.stringify(kind)}`);
  }
  return { start: start as number, end: end as number, ...(typeof kind === 'string' && kind !== '' ? { kind } : {}) };
}

/** Spans as a request sends them (a list; absent or null is none), checked against `text`. */
export function readPrivateSpans(raw: unknown, text: string, field: string): PrivateText[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) invalid(`${field} must be a list of [start, end] code-point ranges, got ${JSON.stringify(raw)}`);
  if (raw.length > MAX_PRIVATE_SPANS) invalid(`${field} has ${raw.length} spans; the limit is ${MAX_PRIVATE_SPANS}`);
  return privateTextsOf(
    raw.map((span, i) => readSpan(span, `${field}[${i}]`)),
    text,
    field,
  );
}

/** The texts under checked-shape `spans` of `text`: INVALID_ARGUMENT for a span outside it, empty, out of order or overlapping. */
export function privateTextsOf(spans: readonly PrivateSpan[], text: string, field: string): PrivateText[] {
  const points = Array.from(text);
  let previousEnd = 0;
  return spans.map(({ start, end, kind }, i) => {
    const at = `${field}[${i}]`;
    if (start < 0 || end > points.length || start >= end)
      invalid(`${at} = [${start}, ${end}) is not a non-empty range inside the text's ${points.length} code points`);
    if (start < previousEnd)
      invalid(`${at} = [${start}, ${end}) overlaps or comes before the span before it (which ends at ${previousEnd}); give spans in order, without overlaps`);
    previousEnd = end;
    const value = points.slice(start, end).join('');
    if (value.trim() === '') invalid(`${at} = [${start}, ${end}) holds only whitespace`);
    return { text: value, kind: kind ?? MARKED_KIND };
  });
}
