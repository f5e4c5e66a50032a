/**
 * `/tokenize` and `/detokenize` as llama.cpp's server and vLLM name them, in the edge model's vocabulary,
 * so a client can count a prompt against the context window or read ids back. Requests in either server's
 * shape (llama.cpp: `content`; vLLM: `prompt` or `messages`); replies with both servers' fields (`tokens`
 * for both; vLLM's `count` and `max_model_len`; `content` and vLLM's `prompt` for text). Behind the access
 * token, like the other APIs; every refusal is JSON (app.tsx).
 *
 * Text is encoded as those servers encode it, so that a chat a client renders itself counts as the chat
 * endpoints count it:
 * - special-token text (`<|im_start|>`, `</s>`) becomes the special token, as llama.cpp's `parse_special`
 *   (default true) and Hugging Face's encoding behind vLLM do; `parse_special: false` reads it as ordinary
 *   characters, as the edge reads a prompt it generates from;
 * - the BOS token goes first where the edge puts one before a prompt (where the pack and its tokenizer
 *   have one) when `add_special` (llama.cpp's name, default false with `content`) or `add_special_tokens`
 *   (vLLM's, default true with `prompt`) says so: each shape gets its own server's default.
 * `messages` are rendered with the chat template and encoded as the chat endpoints encode them; the three
 * options are for text and refused there (vLLM's default, `add_special_tokens: false`, passes). `model`,
 * when given, must be the served model (served-model.ts). Text with a lone surrogate is refused as
 * /api/generate refuses it.
 *
 * @example
 * POST /tokenize {"content": "Once upon a time"}  → {"tokens": [403, ...], "count": 4, "max_model_len": 512}
 * POST /tokenize {"prompt": "Once upon a time"}   → {"tokens": [1, 403, ...], "count": 5, "max_model_len": 512}
 * POST /detokenize {"tokens": [403, 407]}          → {"content": "Once upon", "prompt": "Once upon"}
 */
import { Hono } from 'hono';
import { AppError } from '../../shared/errors.ts';
import { encodePrompt } from '../loop/edge-engine.ts';
import type { EdgeChat } from '../chat/edge-chat.ts';
import { readChatMessages } from '../chat/chat-messages.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import { refuseLoneSurrogate } from '../request/generation-request.ts';
import { readJsonObject } from './request-body.ts';
import { checkServedModel } from './served-model.ts';

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

/** The keys a body may hold: one list per route, so an unknown key is refused by name rather than ignored. */
function onlyKeys(body: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) invalid(`unknown field ${JSON.stringify(unknown[0])}; the fields are ${allowed.join(', ')}`);
}

/** The options that say how text is encoded; a conversation is encoded as the chat endpoints encode it. */
const TEXT_OPTIONS = ['add_special', 'add_special_tokens', 'parse_special'] as const;

function flag(body: Record<string, unknown>, name: string, fallback: boolean): boolean {
  const value = body[name] ?? fallback;
  if (typeof value !== 'boolean') invalid(`${name} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

/** `add_special` and `add_special_tokens` name one option; both given, they must agree. */
function addSpecial(body: Record<string, unknown>, fallback: boolean): boolean {
  const llamaCpp = flag(body, 'add_special', fallback);
  const vllm = flag(body, 'add_special_tokens', fallback);
  if (Object.hasOwn(body, 'add_special') && Object.hasOwn(body, 'add_special_tokens') && llamaCpp !== vllm) {
    invalid('add_special and add_special_tokens name the same option; give one, or the same value for both');
  }
  return Object.hasOwn(body, 'add_special') ? llamaCpp : vllm;
}

function checkModel(body: Record<string, unknown>, served: string): void {
  if (body.model === undefined) return;
  if (typeof body.model !== 'string') invalid(`model must be a string, got ${JSON.stringify(body.model)}`);
  checkServedModel(body.model, served);
}

export function tokenizeRoutes(runtime: EdgeRuntime, chat: EdgeChat, modelName: string): Hono {
  const api = new Hono();
  const { tokenizer, edgeModel } = runtime.engine;
  const maxModelLen = edgeModel.pack.maxPositions;
  // What the edge puts before a prompt it generates from: the BOS token, or nothing where the pack or its tokenizer has none.
  const bos = encodePrompt(runtime.engine, '');

  function encodeConversation(body: Record<string, unknown>): number[] {
    for (const name of TEXT_OPTIONS) {
      if (Object.hasOwn(body, name) && body[name] !== false) {
        invalid(
          `${name} is for text (content or prompt): a conversation is encoded as the chat endpoints encode it, its template's special tokens as their ids`,
        );
      }
    }
    const { text, ids } = chat.prompt(readChatMessages(body.messages));
    refuseLoneSurrogate(text, 'messages');
    return ids;
  }

  function encodeText(body: Record<string, unknown>, field: 'content' | 'prompt'): number[] {
    const text = body[field];
    if (typeof text !== 'string') invalid(`${field} must be a string`);
    refuseLoneSurrogate(text, field);
    const parseSpecial = flag(body, 'parse_special', true);
    // llama.cpp adds nothing unless asked; vLLM encodes as Hugging Face does, special tokens added.
    const withBos = addSpecial(body, field === 'prompt');
    const ids = tokenizer.encode(text, { addBos: false, parseSpecialTokens: parseSpecial });
    return withBos ? [...bos, ...ids] : ids;
  }

  api.post('/tokenize', async (c) => {
    const body = await readJsonObject(c);
    onlyKeys(body, ['content', 'prompt', 'messages', ...TEXT_OPTIONS, 'model']);
    checkModel(body, modelName);
    const given = (['content', 'prompt', 'messages'] as const).filter((k) => Object.hasOwn(body, k));
    if (given.length !== 1) invalid('give exactly one of content, prompt (text) or messages (a conversation)');
    const field = given[0]!;
    const tokens = field === 'messages' ? encodeConversation(body) : encodeText(body, field);
    return c.json({ tokens, count: tokens.length, max_model_len: maxModelLen });
  });

  api.post('/detokenize', async (c) => {
    const body = await readJsonObject(c);
    onlyKeys(body, ['tokens', 'model']);
    checkModel(body, modelName);
    const ids = body.tokens;
    if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0)) invalid('tokens must be a list of token ids (non-negative integers)');
    const text = tokenizer.decode(ids as number[], { skipSpecialTokens: false });
    return c.json({ content: text, prompt: text });
  });

  return api;
}
