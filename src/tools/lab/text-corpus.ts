/**
 * The text a router is trained and evaluated on, split into documents (paragraphs) the way people keep
 * text: `<|endoftext|>` between documents (GPT-style dumps), blank lines between paragraphs, or one
 * document per line (JSONL-free story lists). `auto` picks the first of these the file uses. For the
 * training text, the first `trainFraction` of the documents (in order) are for training; the rest are
 * held out and only ever used for evaluation.
 *
 * @example
 * splitText('one\ntwo\n', 'auto'); // { split: 'line', paragraphs: ['one', 'two'] }
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';

export const TEXT_SPLITS = ['auto', 'endoftext', 'blank-line', 'line'] as const;
export type TextSplit = (typeof TEXT_SPLITS)[number];
export type ResolvedSplit = Exclude<TextSplit, 'auto'>;

export const END_OF_TEXT = '<|endoftext|>';

export interface TextCorpus {
  path: string;
  sha256: string;
  split: ResolvedSplit;
  paragraphs: string[];
}

function clean(parts: string[]): string[] {
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

export function splitParagraphs(text: string): string[] {
  return clean(text.split(/\n\s*\n/));
}

/** The split `auto` chooses: `<|endoftext|>` if present, else blank lines if any, else lines. */
export function detectSplit(text: string): ResolvedSplit {
  if (text.includes(END_OF_TEXT)) return 'endoftext';
  if (/\S[^\S\n]*\n[^\S\n]*\n\s*\S/.test(text)) return 'blank-line';
  return 'line';
}

export function splitText(text: string, split: TextSplit = 'auto'): { split: ResolvedSplit; paragraphs: string[] } {
  const resolved = split === 'auto' ? detectSplit(text) : split;
  const paragraphs = resolved === 'endoftext' ? clean(text.split(END_OF_TEXT)) : resolved === 'blank-line' ? splitParagraphs(text) : clean(text.split('\n'));
  return { split: resolved, paragraphs };
}

export function readTextCorpus(path: string, split: TextSplit = 'auto'): TextCorpus {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read text file (${errorMessage(e)})`);
  }
  const parts = splitText(bytes.toString('utf8'), split);
  if (parts.paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${path}: the text file is empty`);
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), ...parts };
}

/** Paragraphs (or any documents: a chat dataset's conversations) [0, k) for training and [k, n) held out, k = round(n · trainFraction). */
export function splitByParagraph<T>(paragraphs: readonly T[], trainFraction: number): { train: T[]; heldOut: T[] } {
  const k = Math.round(paragraphs.length * trainFraction);
  return { train: paragraphs.slice(0, k), heldOut: paragraphs.slice(k) };
}
