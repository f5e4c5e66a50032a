/**
 * The text a router is trained and evaluated on: paragraphs separated by blank lines, each trimmed.
 * The first `trainFraction` of them (by paragraph order) are for training; the rest are held out and
 * only ever used for evaluation.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';

export interface TextCorpus {
  path: string;
  sha256: string;
  paragraphs: string[];
}

export function splitParagraphs(text: string): string[] {
  return text
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
}

export function readTextCorpus(path: string): TextCorpus {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read text file (${errorMessage(e)})`);
  }
  const paragraphs = splitParagraphs(bytes.toString('utf8'));
  if (paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${path}: the text file is empty`);
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), paragraphs };
}

/** Paragraphs [0, k) for training and [k, n) held out, k = round(n · trainFraction). */
export function splitByParagraph(paragraphs: readonly string[], trainFraction: number): { train: string[]; heldOut: string[] } {
  const k = Math.round(paragraphs.length * trainFraction);
  return { train: paragraphs.slice(0, k), heldOut: paragraphs.slice(k) };
}
