/**
 * `/tokenize` and `/detokenize` as llama.cpp's server and vLLM name them, in the edge model's vocabulary,
 * so a client can count a prompt against the context window or read ids back. Requests in either server's
 * shape (llama.cpp: `content`, `add_special`; vLLM: `prompt` or `messages`, `add_special_tokens`); replies
 * with both servers' fields (`tokens` for both; vLLM's `count` and `max_model_len`; `content` and vLLM's
 * `prompt` for text). Behind the access token, like the other APIs.
 *
 * @example
 * POST /tokenize {"content": "Once upon a time"}  → {"tokens": [1, 403, ...], "count": 5, "max_model_len": 512}
 * POST /detokenize {"tokens": [403, 407]}          → {"content": "Once upon", "prompt": "Once upon"}
 */
import { Hono } from 'hono';
import { AppError } from '../../shared/errors.ts';
import { encodePrompt } from '../loop/edge-engine.ts';
import type { EdgeChat } from '../chat/edge-chat.ts';
import { readChatMessages } from '../chat/chat-messages.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import { readJsonObject } from './request-body.ts';

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

/** The keys a body may hold: one list per route, so an unknown key is refused by name rather than ignored. */
function onlyKeys(body: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) invalid(`unknown field ${JSON.stringify(unknown[0])}; the fields are ${allowed.join(', ')}`);
}

export function tokenizeRoutes(runtime: EdgeRuntime, chat: EdgeChat): Hono {
  const api = new Hono();
  const { tokenizer, edgeModel } = runtime.engine;
  const maxModelLen = edgeModel.pack.maxPositions;

  api.post('/tokenize', async (c) => {
    const body = await readJsonObject(c);
    onlyKeys(body, ['content', 'prompt', 'messages', 'add_special', 'add_special_tokens', 'model']);
    const given = ['content', 'prompt', 'messages'].filter((k) => Object.hasOwn(body, k));
    if (given.length !== 1) invalid('give exactly one of content, prompt (text) or messages (a conversation)');
    let tokens: number[];
    if (given[0] === 'messages') tokens = chat.prompt(readChatMessages(body.messages)).ids;
    else {
      const text = body[given[0]!];
      if (typeof text !== 'string') invalid(`${given[0]} must be a string`);
      const addSpecial = body.add_special ?? body.add_special_tokens ?? true;
      if (typeof addSpecial !== 'boolean') invalid('add_special / add_special_tokens must be true or false');
      // As the edge encodes a prompt it generates from: BOS first where the pack and tokenizer have one.
      tokens = addSpecial ? encodePrompt(runtime.engine, text) : tokenizer.encode(text, { addBos: false, parseSpecialTokens: false });
    }
    return c.json({ tokens, count: tokens.length, max_model_len: maxModelLen });
  });

  api.post('/detokenize', async (c) => {
    const body = await readJsonObject(c);
    onlyKeys(body, ['tokens', 'model']);
    const ids = body.tokens;
    if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0)) invalid('tokens must be a list of token ids (non-negative integers)');
    const text = tokenizer.decode(ids as number[], { skipSpecialTokens: false });
    return c.json({ content: text, prompt: text });
  });

  return api;
}
