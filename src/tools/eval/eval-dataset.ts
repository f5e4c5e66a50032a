/**
 * An evaluation data set, recognised from the file's contents: CommonsenseQA JSONL (either layout, told
 * apart by the first record) or plain text (paragraphs separated by blank lines, e.g. TinyStories).
 *
 * @example
 * const data = readEvalDataset('commonsenseqa_50_samples.jsonl'); // { kind: 'multiple-choice', ... }
 */
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { splitParagraphs } from '../router/text-corpus.ts';
import { choiceFormatOf, toQuestion, type ChoiceFormat, type MultipleChoiceQuestion } from './multiple-choice.ts';

export type DatasetFormat = ChoiceFormat | 'text';

export type EvalDataset =
  | { kind: 'multiple-choice'; path: string; format: ChoiceFormat; questions: MultipleChoiceQuestion[] }
  | { kind: 'text'; path: string; format: 'text'; paragraphs: string[] };

function parseJsonLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * The format of a file's contents: a first non-empty line that is a JSON object of a CommonsenseQA
 * layout makes it JSONL of that layout; a JSON object of any other shape is refused (a JSONL file this
 * tool does not know, rather than text to continue); anything else is plain text.
 */
export function detectDatasetFormat(contents: string): DatasetFormat {
  const first = contents.split('\n').find((l) => l.trim() !== '')?.trim() ?? '';
  const record = first.startsWith('{') ? parseJsonLine(first) : undefined;
  if (record === undefined || typeof record !== 'object' || record === null || Array.isArray(record)) return 'text';
  const format = choiceFormatOf(record);
  if (!format) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `JSONL records with keys ${Object.keys(record).join(', ')} are not a known format (CommonsenseQA nested or flattened)`,
    );
  }
  return format;
}

export function parseEvalDataset(contents: string, path: string): EvalDataset {
  const format = detectDatasetFormat(contents);
  if (format === 'text') {
    const paragraphs = splitParagraphs(contents);
    if (paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${path}: the text file is empty`);
    return { kind: 'text', path, format, paragraphs };
  }
  const questions: MultipleChoiceQuestion[] = [];
  for (const [i, line] of contents.split('\n').entries()) {
    if (line.trim() === '') continue;
    const record = parseJsonLine(line);
    if (record === undefined) throw new AppError('INVALID_ARGUMENT', `${path}:${i + 1}: not valid JSON`);
    questions.push(toQuestion(record, `${path}:${i + 1}`));
  }
  return { kind: 'multiple-choice', path, format, questions };
}

export function readEvalDataset(path: string): EvalDataset {
  let contents: string;
  try {
    contents = readFileSync(path, 'utf8');
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read (${errorMessage(e)})`);
  }
  try {
    return parseEvalDataset(contents, path);
  } catch (e) {
    if (e instanceof AppError && !e.message.startsWith(path)) throw new AppError(e.code, `${path}: ${e.message}`, { cause: e });
    throw e;
  }
}
