/**
 * What `router train --text` and `router eval --text` read: plain text split into paragraphs
 * (text-corpus.ts), or a chat dataset, JSONL of `{"messages": [...]}` (chat-dataset.ts), told apart by
 * the file's contents. Either way it is a list of documents (paragraphs or conversations) whose first
 * `trainFraction` are for training and the rest held out.
 *
 * @example
 * const corpus = readTrainingCorpus('chats.jsonl'); // { kind: 'chat', conversations: [...], ... }
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { parseChatDataset, type ChatDataset } from './chat-dataset.ts';
import { splitText, type TextCorpus, type TextSplit } from './text-corpus.ts';

export type TrainingCorpus = (TextCorpus & { kind: 'text' }) | (ChatDataset & { kind: 'chat'; path: string; sha256: string });

export function readTrainingCorpus(path: string, split: TextSplit = 'auto'): TrainingCorpus {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read text file (${errorMessage(e)})`);
  }
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const contents = bytes.toString('utf8');
  const chat = parseChatDataset(contents, path);
  if (chat) return { kind: 'chat', path, sha256, ...chat };
  const parts = splitText(contents, split);
  if (parts.paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${path}: the text file is empty`);
  return { kind: 'text', path, sha256, ...parts };
}

/** How many documents the corpus holds, and what one is called in messages. */
export function documentCount(corpus: TrainingCorpus): { count: number; noun: 'paragraph' | 'conversation' } {
  return corpus.kind === 'chat' ? { count: corpus.conversations.length, noun: 'conversation' } : { count: corpus.paragraphs.length, noun: 'paragraph' };
}
