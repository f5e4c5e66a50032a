/**
 * A conversation as a request carries it (the JSON API's and gRPC's `messages`): a non-empty list of
 * `{role, content}`, roles system, user and assistant (`developer`, OpenAI's newer name for system, too), and
 * optionally `private_spans` of the content (privacy/private-spans.ts).
 * Checked strictly, with the index of what is wrong; the OpenAI API reads its own shape (openai-request.ts).
 *
 * @example
 * readChatMessages([{ role: 'user', content: 'Hi' }]); // [{ role: 'user', content: 'Hi' }]
 */
import type { ChatMessage } from '../../shared/text/chat-template.ts';
import { AppError } from '../../shared/errors.ts';
import { readPrivateSpans } from '../privacy/private-spans.ts';
import type { PrivateText } from '../privacy/private-values.ts';

/** A message as the edge reads it: what the template renders, and the texts of it the cloud must not see. */
export type EdgeChatMessage = ChatMessage & { privateTexts?: PrivateText[] };

/** A Map: a role named `constructor` or `__proto__` is a role like any other, and refused. The OpenAI API reads the same. */
export const CHAT_ROLES: ReadonlyMap<string, ChatMessage['role']> = new Map([
  ['system', 'system'],
  ['developer', 'system'],
  ['user', 'user'],
  ['assistant', 'assistant'],
]);

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

export function readChatMessages(value: unknown): EdgeChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) invalid('messages must be a non-empty list of {role, content}');
  return value.map((message: unknown, i) => {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) invalid(`messages[${i}] must be an object with role and content`);
    const fields = message as Record<string, unknown>;
    const extra = Object.keys(fields).filter((k) => k !== 'role' && k !== 'content' && k !== 'private_spans');
    if (extra.length > 0) invalid(`messages[${i}] has an unknown field ${JSON.stringify(extra[0])}; a message is {role, content, private_spans}`);
    const role = typeof fields.role === 'string' ? CHAT_ROLES.get(fields.role) : undefined;
    if (role === undefined) invalid(`messages[${i}].role must be one of ${[...CHAT_ROLES.keys()].join(', ')}, got ${JSON.stringify(fields.role)}`);
    if (typeof fields.content !== 'string') invalid(`messages[${i}].content must be a string, got ${JSON.stringify(fields.content) ?? 'nothing'}`);
    const privateTexts = readPrivateSpans(
      Object.hasOwn(fields, 'private_spans') ? fields.private_spans : undefined,
      fields.content,
      `messages[${i}].private_spans`,
    );
    return { role, content: fields.content, ...(privateTexts.length > 0 ? { privateTexts } : {}) };
  });
}
