/**
 * A chat dataset: JSONL with one conversation per line, `{"messages": [{"role", "content"}, ...]}` (the
 * layout chat fine-tuning sets use). A file is one when any line is a JSON object with a `messages` key;
 * then every non-blank line must be one, and a line that is not (malformed JSON, another shape, a role
 * other than system / user / assistant, content that is not text) is refused with its line number.
 * Conversations without an assistant turn teach a router nothing: they are skipped (their lines kept in
 * `skipped`), and a file where none has one is refused.
 *
 * @example
 * const chat = parseChatDataset('{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]}\n', 'chat.jsonl');
 * chat?.conversations[0]!.messages.length; // 2
 */
import { AppError } from '../../shared/errors.ts';
import type { ChatMessage } from '../../shared/text/chat-template.ts';
import { isRecord } from '../../shared/is-record.ts';

export interface Conversation {
  /** The file's line it was read from (1-based), to name it in errors. */
  line: number;
  messages: ChatMessage[];
}

export interface ChatDataset {
  conversations: Conversation[];
  /** Lines of conversations without an assistant turn, left out. */
  skipped: number[];
}

const ROLES: readonly string[] = ['system', 'user', 'assistant'] satisfies ChatMessage['role'][];

function parsed(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** Whether a line holds a conversation record (a JSON object with `messages`), without judging the rest. */
function isConversationLine(line: string): boolean {
  const trimmed = line.trim();
  if (!trimmed.startsWith('{')) return false;
  const record = parsed(trimmed);
  return isRecord(record) && 'messages' in record;
}

function toConversation(record: unknown, line: number, where: string): Conversation {
  const bad = (message: string): never => {
    throw new AppError('INVALID_ARGUMENT', `${where}:${line}: ${message}`);
  };
  if (!isRecord(record) || !('messages' in record)) {
    return bad('not a conversation ({"messages": [...]}); a chat dataset has one on every line, so this file mixes formats');
  }
  if (!Array.isArray(record.messages) || record.messages.length === 0) return bad('"messages" must be a non-empty array');
  const messages = record.messages.map((m: unknown, k): ChatMessage => {
    if (!isRecord(m)) return bad(`message ${k + 1} is not an object`);
    if (typeof m.role !== 'string' || !ROLES.includes(m.role))
      return bad(`message ${k + 1} has role ${JSON.stringify(m.role)}; expected one of ${ROLES.join(', ')}`);
    if (typeof m.content !== 'string') return bad(`message ${k + 1}'s content must be a string, got ${JSON.stringify(m.content)}`);
    return { role: m.role as ChatMessage['role'], content: m.content };
  });
  return { line, messages };
}

/**
 * The conversations of `contents`, or undefined when it is not a chat dataset (no line is a JSON
 * object with `messages`: plain text, read as today). `where` names the file in errors.
 */
export function parseChatDataset(contents: string, where: string): ChatDataset | undefined {
  const lines = contents.split('\n');
  if (!lines.some(isConversationLine)) return undefined;
  const conversations: Conversation[] = [];
  const skipped: number[] = [];
  for (const [i, text] of lines.entries()) {
    if (text.trim() === '') continue;
    const record = parsed(text);
    if (record === undefined) throw new AppError('INVALID_ARGUMENT', `${where}:${i + 1}: not valid JSON (a chat dataset has one JSON conversation per line)`);
    const conversation = toConversation(record, i + 1, where);
    if (conversation.messages.some((m) => m.role === 'assistant')) conversations.push(conversation);
    else skipped.push(i + 1);
  }
  if (conversations.length === 0) {
    throw new AppError('INVALID_ARGUMENT', `${where}: no conversation has an assistant turn (a router learns from the assistant's tokens only)`);
  }
  return { conversations, skipped };
}
