/**
 * OpenAI's chat `messages`: roles system (and `developer`, its newer name), user, assistant and tool; text
 * content, as a string or a list of text parts; an assistant's `tool_calls` (its arguments a JSON string of
 * an object, as OpenAI sends them) and a tool message's `tool_call_id`, which must answer a call made
 * earlier in the conversation; and each message's `private_spans`. Anything else is refused by name.
 *
 * @example
 * parseMessages([{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: null, tool_calls: [...] },
 *   { role: 'tool', tool_call_id: 'call_1', content: '21 °C' }]);
 */
import { isAppError } from '../../../shared/errors.ts';
import { isRecord } from '../../../shared/is-record.ts';
import type { ChatMessage, ChatToolCall } from '../../../shared/text/chat-template.ts';
import { CHAT_ROLES, type EdgeChatMessage } from '../../chat/chat-messages.ts';
import { readPrivateSpans } from '../../privacy/private-spans.ts';
import type { PrivateText } from '../../privacy/private-values.ts';
import { OpenAIParamError } from './openai-errors.ts';
import { show } from './openai-fields.ts';

const ROLES: ReadonlyMap<string, ChatMessage['role']> = new Map([...CHAT_ROLES, ['tool', 'tool']]);
const KEYS: Readonly<Record<ChatMessage['role'], readonly string[]>> = {
  system: ['role', 'content', 'name', 'private_spans'],
  user: ['role', 'content', 'name', 'private_spans'],
  assistant: ['role', 'content', 'name', 'private_spans', 'tool_calls'],
  tool: ['role', 'content', 'private_spans', 'tool_call_id'],
};

export function parseMessages(value: unknown): EdgeChatMessage[] {
  if (value === undefined) throw new OpenAIParamError('messages', 'messages is required');
  if (!Array.isArray(value) || value.length === 0) throw new OpenAIParamError('messages', 'messages must be a non-empty list');
  const callIds = new Set<string>();
  return value.map((message: unknown, i) => {
    const at = `messages[${i}]`;
    if (!isRecord(message)) throw new OpenAIParamError(at, `${at} must be an object`);
    const role = typeof message.role === 'string' ? ROLES.get(message.role) : undefined;
    if (role === undefined) {
      throw new OpenAIParamError(`${at}.role`, `${at}.role must be one of ${[...ROLES.keys()].join(', ')}, got ${show(message.role)}`);
    }
    for (const key of Object.keys(message)) {
      if (!KEYS[role].includes(key) && message[key] !== null)
        throw new OpenAIParamError(`${at}.${key}`, `unsupported parameter: ${at}.${key} is not supported by this edge on a ${message.role} message`);
    }
    const toolCalls = role === 'assistant' ? parseToolCalls(message.tool_calls, `${at}.tool_calls`) : undefined;
    toolCalls?.forEach((c) => callIds.add(c.id));
    // An assistant turn that only calls functions has no content (OpenAI sends null).
    const content = toolCalls && (message.content === null || message.content === undefined) ? '' : messageText(message.content, `${at}.content`);
    const privateTexts = spansOf(Object.hasOwn(message, 'private_spans') ? message.private_spans : undefined, content, `${at}.private_spans`);
    const toolCallId = role === 'tool' ? answeredCall(message.tool_call_id, callIds, `${at}.tool_call_id`) : undefined;
    return {
      role,
      content,
      ...(toolCalls ? { toolCalls } : {}),
      ...(toolCallId === undefined ? {} : { toolCallId }),
      ...(privateTexts.length > 0 ? { privateTexts } : {}),
    };
  });
}

function answeredCall(value: unknown, callIds: ReadonlySet<string>, at: string): string {
  if (typeof value !== 'string' || value === '') throw new OpenAIParamError(at, `${at} is required on a tool message: the id of the call it answers`);
  if (!callIds.has(value)) throw new OpenAIParamError(at, `${at} ${show(value)} answers no tool call of an earlier assistant message`);
  return value;
}

function parseToolCalls(value: unknown, at: string): ChatToolCall[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.length === 0) throw new OpenAIParamError(at, `${at} must be a non-empty list of calls`);
  return value.map((call: unknown, j) => {
    const here = `${at}[${j}]`;
    if (!isRecord(call) || typeof call.id !== 'string' || call.id === '' || (call.type !== undefined && call.type !== 'function') || !isRecord(call.function)) {
      throw new OpenAIParamError(here, `${here} must be {id, type: "function", function: {name, arguments}}`);
    }
    const { name, arguments: text } = call.function;
    if (typeof name !== 'string' || name === '') throw new OpenAIParamError(`${here}.function.name`, `${here}.function.name must be a non-empty string`);
    let args: unknown;
    try {
      args = typeof text === 'string' ? JSON.parse(text) : undefined;
    } catch {
      args = undefined;
    }
    if (!isRecord(args))
      throw new OpenAIParamError(`${here}.function.arguments`, `${here}.function.arguments must be the JSON text of an object, got ${show(text)}`);
    return { id: call.id, name, arguments: args };
  });
}

/** A message's content: a string, or a list of text parts (joined with newlines, as vLLM does). */
function messageText(content: unknown, at: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new OpenAIParamError(at, `${at} must be a string or a list of text parts, got ${show(content)}`);
  return content
    .map((part: unknown, j) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      if (p?.type !== 'text') throw new OpenAIParamError(`${at}[${j}]`, `${at}[${j}]: only text parts are supported, got type ${show(p?.type)}`);
      if (typeof p.text !== 'string') throw new OpenAIParamError(`${at}[${j}].text`, `${at}[${j}].text must be a string`);
      return p.text;
    })
    .join('\n');
}

/** `readPrivateSpans` with its refusal as an OpenAI error naming `param`. */
export function spansOf(value: unknown, text: string, param: string): PrivateText[] {
  try {
    return readPrivateSpans(value, text, param);
  } catch (e) {
    if (isAppError(e)) throw new OpenAIParamError(param, e.message, e.code);
    throw e;
  }
}
