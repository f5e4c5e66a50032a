/**
 * Marks of private text in a text box, as the page keeps them (private-marks.js): ranges of the box's value
 * in UTF-16 units, as `selectionStart`/`selectionEnd` give them, each with its text and kind. The request's
 * `private_spans` counts Unicode code points instead (an emoji is two UTF-16 units and one code point), so
 * the ranges are converted only when the field is written. No DOM here: the functions are tested in bun
 * (tests/page-private-spans.test.ts) and loaded by the page as a module.
 *
 * When the box's text changes after marking, a mark follows its text if the edit was elsewhere (typing before
 * it moves it) and is dropped if the edit touched its own text: a mark never points at text other than what
 * the person marked, and never silently grows to cover new text.
 *
 * @example
 * const { marks } = addMark('😀 Lily ran', [], 3, 7, 'name');
 * spansField('😀 Lily ran', marks); // '[[2,6,"name"]]'
 */

const isHigh = (unit) => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit) => unit >= 0xdc00 && unit <= 0xdfff;
const isSpace = (char) => /\s/.test(char);

/** Code points of `text` before UTF-16 offset `at`; an offset inside a surrogate pair counts the whole pair. */
export function codePointOffset(text, at) {
  let points = 0;
  for (let i = 0; i < at && i < text.length; i++) {
    if (isHigh(text.charCodeAt(i)) && isLow(text.charCodeAt(i + 1))) i++;
    points++;
  }
  return points;
}

/** `[start, end)` widened so that neither end splits a surrogate pair. */
function wholeCodePoints(text, start, end) {
  const splits = (at) => at > 0 && isHigh(text.charCodeAt(at - 1)) && isLow(text.charCodeAt(at));
  return [splits(start) ? start - 1 : start, splits(end) ? end + 1 : end];
}

/**
 * `marks` with the selection `[start, end)` of `text` marked as `kind`: whitespace at its ends left out, any
 * mark it overlaps merged into it (the merged mark takes the new kind), in order of start. `error` says why
 * nothing was marked (no selection, only whitespace selected); `marks` is then unchanged.
 */
export function addMark(text, marks, start, end, kind) {
  if (start === end) return { marks, error: 'Select the private text in the box first, then press Mark private.' };
  [start, end] = wholeCodePoints(text, Math.min(start, end), Math.max(start, end));
  while (start < end && isSpace(text[start])) start++;
  while (end > start && isSpace(text[end - 1])) end--;
  if (start === end) return { marks, error: 'The selection holds only spaces; select a word or a number.' };
  const kept = [];
  for (const mark of marks) {
    if (mark.start < end && start < mark.end) {
      start = Math.min(start, mark.start);
      end = Math.max(end, mark.end);
    } else kept.push(mark);
  }
  const mark = { start, end, kind, text: text.slice(start, end) };
  return { marks: [...kept, mark].sort((a, b) => a.start - b.start) };
}

/**
 * The marks of `before` carried over to `after`, the box's text after one edit (what changed is found as the
 * part between the longest common start and end): a mark before the edit stays, one after it moves by the
 * length the edit added, one the edit touched is dropped. A mark whose text is not where it says afterwards
 * is dropped too, whatever the reason.
 */
export function followEdit(before, after, marks) {
  if (before === after) return { marks, dropped: [] };
  const shorter = Math.min(before.length, after.length);
  let prefix = 0;
  while (prefix < shorter && before.charCodeAt(prefix) === after.charCodeAt(prefix)) prefix++;
  let suffix = 0;
  while (suffix < shorter - prefix && before.charCodeAt(before.length - 1 - suffix) === after.charCodeAt(after.length - 1 - suffix)) suffix++;
  const editEnd = before.length - suffix;
  const shift = after.length - before.length;
  const kept = [];
  const dropped = [];
  for (const mark of marks) {
    const moved = mark.end <= prefix ? mark : mark.start >= editEnd ? { ...mark, start: mark.start + shift, end: mark.end + shift } : undefined;
    if (moved && after.slice(moved.start, moved.end) === mark.text) kept.push(moved);
    else dropped.push(mark);
  }
  return { marks: kept, dropped };
}

/** The `private_spans` form field for `marks` of `text`: the JSON of `[start, end, kind]` in code points; '' for none. */
export function spansField(text, marks) {
  if (marks.length === 0) return '';
  return JSON.stringify(marks.map((m) => [codePointOffset(text, m.start), codePointOffset(text, m.end), m.kind]));
}
