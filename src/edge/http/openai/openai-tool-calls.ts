/**
 * A chat reply with function calls in OpenAI's shapes: the whole message's `content` (null when it only
 * calls) and `tool_calls` (`{id, type: "function", function: {name, arguments}}`, the arguments the JSON
 * text the model wrote), and a stream's `delta.tool_calls`: a call's first chunk carries its index, id,
 * type and name with empty arguments, and the next ones its arguments' text piece by piece. A reply that
 * called a function and ended at its end token finishes with `tool_calls`. The shape holds the reading
 * of one reply (chat/tool-call-reader.ts), so each response gets its own.
 *
 * @example
 * const shape = chatWithTools(chat.toolCallFormat());
 * for await (const chunk of streamChunks(shape, meta, run.events(signal), false)) write(chunk);
 */
import { readToolCalls, ToolCallReader, type ToolCallPiece } from '../../chat/tool-call-reader.ts';
import type { ToolCallFormat } from '../../constraint/tool-call-tags.ts';
import { CHAT, type ResponseShape } from './openai-responses.ts';

function deltaOf(piece: ToolCallPiece): Record<string, unknown> {
  switch (piece.type) {
    case 'content':
      return { content: piece.text };
    case 'call':
      return { tool_calls: [{ index: piece.index, id: piece.id, type: 'function', function: { name: piece.name, arguments: '' } }] };
    case 'arguments':
      return { tool_calls: [{ index: piece.index, function: { arguments: piece.text } }] };
  }
}

const chunkChoice = (delta: Record<string, unknown>, finish: string | null) => ({ index: 0, delta, logprobs: null, finish_reason: finish });

/** A reply that called and then ended (rather than running out of tokens) finishes with `tool_calls`. */
const finishOf = (calls: number, finish: string) => (calls > 0 && finish === 'stop' ? 'tool_calls' : finish);

export function chatWithTools(format: ToolCallFormat): ResponseShape {
  const reader = new ToolCallReader(format);
  return {
    ...CHAT,
    choice: (text, finish) => {
      const { content, calls } = readToolCalls(format, text);
      const toolCalls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
      return {
        index: 0,
        message: { role: 'assistant', content, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
        logprobs: null,
        finish_reason: finishOf(calls.length, finish),
      };
    },
    chunkChoices: (text, finish) => {
      const pieces = reader.push(text);
      if (finish === null) return pieces.map((p) => chunkChoice(deltaOf(p), null));
      pieces.push(...reader.finish());
      return [...pieces.map((p) => chunkChoice(deltaOf(p), null)), chunkChoice({}, finishOf(reader.callCount, finish))];
    },
  };
}
