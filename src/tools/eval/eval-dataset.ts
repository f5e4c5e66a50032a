/**
 * An evaluation data set, recognised from the file's contents: CommonsenseQA JSONL (either layout, told
 * apart by the first record), a chat dataset (JSONL of `{"messages": [...]}`, chat-dataset.ts) or plain text, split into documents by `<|endoftext|>`, blank lines or
 * lines (text-corpus.ts; chosen from the file unless given). The file's sha256 tells whether it is a
 * router's training text.
 *
 * @example
 * const data = readEvalDataset('commonsenseqa_50_samples.jsonl'); // { kind: 'multiple-choice', ... }
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { parseChatDataset, type Conversation } from '../lab/chat-dataset.ts';
import { splitText, type ResolvedSplit, type TextSplit } from '../lab/text-corpus.ts';
import { choiceFormatOf, toQuestion, type ChoiceFormat, type MultipleChoiceQuestion } from './multiple-choice.ts';

export type DatasetFormat = ChoiceFormat | 'chat' | 'text';

export type EvalDataset =
  | { kind: 'multiple-choice'; path: string; format: ChoiceFormat; questions: MultipleChoiceQuestion[] }
  | { kind: 'chat'; path: string; format: 'chat'; conversations: Conversation[]; skipped: number[]; sha256: string }
  | { kind: 'text'; path: string; format: 'text'; paragraphs: string[]; split: ResolvedSplit; sha256: string };

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
  const first =
    contents
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? '';
  const record = first.startsWith('{') ? parseJsonLine(first) : undefined;
  if (record === undefined || typeof record !== 'object' || record === null || Array.isArray(record)) return 'text';
  if ('messages' in record) return 'chat';
  const format = choiceFormatOf(record);
  if (!format) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `JSONL records with keys ${Object.keys(record).join(', ')} are not a known format (CommonsenseQA nested or flattened, or a chat dataset's messages)`,
    );
  }
  return format;
}

/** `sha256`: of the file's bytes when read from a file (defaults to the UTF-8 encoding of `contents`). */
export function parseEvalDataset(contents: string, path: string, split: TextSplit = 'auto', sha256?: string): EvalDataset {
  const format = detectDatasetFormat(contents);
  const digest = () => sha256 ?? createHash('sha256').update(contents, 'utf8').digest('hex');
  if (format === 'chat') {
    const chat = parseChatDataset(contents, path);
    if (!chat) throw new AppError('INVALID_ARGUMENT', `${path}: not a chat dataset`);
    return { kind: 'chat', path, format, ...chat, sha256: digest() };
  }
  if (format === 'text') {
    const parts = splitText(contents, split);
    if (parts.paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${path}: the text file is empty`);
    return { kind: 'text', path, format, ...parts, sha256: digest() };
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

export function readEvalDataset(path: string, split: TextSplit = 'auto'): EvalDataset {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read (${errorMessage(e)})`);
  }
  try {
    return parseEvalDataset(bytes.toString('utf8'), path, split, createHash('sha256').update(bytes).digest('hex'));
  } catch (e) {
    if (e instanceof AppError && !e.message.startsWith(path)) throw new AppError(e.code, `${path}: ${e.message}`, { cause: e });
    throw e;
  }
}
