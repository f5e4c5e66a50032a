/**
 * A generation from a request body that carries a prompt or a conversation (`messages`, JSON only): a
 * conversation goes through the edge's chat template and starts from its ids; exactly one of the two.
 *
 * @example
 * const run = await startFromBody(runtime, chat, { messages: [{ role: 'user', content: 'Hi' }], max_new_tokens: 8 }, 'typed');
 */
import { AppError } from '../../shared/errors.ts';
import type { EdgeChat } from '../chat/edge-chat.ts';
import { readChatMessages } from '../chat/chat-messages.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import { readGenerationRequest, type RequestEncoding } from '../request/generation-request-fields.ts';

export async function startFromBody(
  runtime: EdgeRuntime,
  chat: EdgeChat,
  body: Record<string, unknown>,
  encoding: RequestEncoding,
  id?: string,
): ReturnType<EdgeRuntime['begin']> {
  if (!Object.hasOwn(body, 'messages')) return runtime.begin(readGenerationRequest(body, encoding), id);
  const { messages, ...fields } = body;
  if (encoding === 'form') throw new AppError('INVALID_ARGUMENT', 'messages are sent as JSON (Content-Type: application/json), not as a form field');
  if (Object.hasOwn(fields, 'prompt')) throw new AppError('INVALID_ARGUMENT', 'give either prompt or messages, not both');
  return chat.start(runtime, readChatMessages(messages), readGenerationRequest(fields, encoding), id);
}
