/** Types of private-spans.js, a module the browser loads as it is (no build step), for the tests that import it. */

/** A marked range of a text box's value, in UTF-16 units (as selectionStart/End), with the text it held. */
export interface Mark {
  start: number;
  end: number;
  kind: string;
  text: string;
}

export function codePointOffset(text: string, at: number): number;
export function addMark(text: string, marks: readonly Mark[], start: number, end: number, kind: string): { marks: readonly Mark[]; error?: string };
export function followEdit(before: string, after: string, marks: readonly Mark[]): { marks: readonly Mark[]; dropped: readonly Mark[] };
export function spansField(text: string, marks: readonly Mark[]): string;
