/**
 * The OpenAI-compatible API of the edge, mounted at `/v1`: `POST /completions`, `POST /chat/completions`,
 * `GET /models`. Each handler parses OpenAI's fields, maps them onto the edge's generation request,
 * calls the same runtime as every other entry point, and writes OpenAI's shapes: a whole response, or
 * `data: {chunk}` events ending with `data: [DONE]` (after a `data: {"error": ...}` event when a stream
 * fails). Refusals are OpenAI's error objects with 400, 401, 404 (unknown model or path), 413 and 429.
 * The edge's access token is the API key (`Authorization: Bearer`). A client that closes its stream
 * (or its connection) stops the generation, which gives its slot back.
 *
 * @example
 * app.route('/v1', createOpenAIRoutes(runtime, { accessToken: 'secret', maxBodyBytes: 262144 }));
 * // curl -H 'Authorization: Bearer secret' localhost:8080/v1/models
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { EdgeChat } from '../../chat/edge-chat.ts';
import type { Logger } from '../../../shared/process/logger.ts';
import { AppError, errorMessage } from '../../../shared/errors.ts';
import type { EdgeRuntime } from '../../edge-runtime.ts';
import { accessTokenGuard, AUTHENTICATE_CHALLENGE } from '../access-token.ts';
import { readJsonObject } from '../request-body.ts';
import { checkServedModel } from '../served-model.ts';
import { bodyTooLarge, OpenAIParamError, openAIError } from './openai-errors.ts';
import { parseChatRequest, parseCompletionRequest, type OpenAIRequest } from './openai-request.ts';
import { CHAT, COMPLETION, streamChunks, wholeResponse, type ResponseShape } from './openai-responses.ts';
import { TokenNames } from './openai-logprobs.ts';
import { chatWithTools } from './openai-tool-calls.ts';

export interface OpenAIRoutesOptions {
  /** When set, the API key every request must carry. */
  accessToken?: string;
  maxBodyBytes: number;
  /** The edge's chat (its template and how messages' special-token text is read). */
  chat: EdgeChat;
  /** The model's name (OpenAI's `model`): the edge's --served-model-name, or the edge pack's folder name. */
  modelName: string;
  /** Where an internal error (a 500) is written. */
  log?: Logger;
}

type Run = ReturnType<EdgeRuntime['start']>;

export function createOpenAIRoutes(runtime: EdgeRuntime, options: OpenAIRoutesOptions): Hono {
  const api = new Hono();
  const { edgeModel, tokenizer } = runtime.engine;
  const { chat, modelName: modelId } = options;
  const created = Math.floor(Date.now() / 1000);

  api.onError((err, c) => {
    const { status, body } = openAIError(err);
    if (status === 500) options.log?.error('internal error', { method: c.req.method, path: c.req.path, error: errorMessage(err) });
    if (status === 401) c.header('www-authenticate', AUTHENTICATE_CHALLENGE);
    return c.json(body, status);
  });
  api.use('*', accessTokenGuard(options.accessToken));
  api.use('*', bodyLimit({ maxSize: options.maxBodyBytes, onError: (c) => c.json(bodyTooLarge(options.maxBodyBytes), 413) }));

  const model = { id: modelId, object: 'model', created, owned_by: 'edge', max_model_len: edgeModel.pack.maxPositions };
  api.get('/models', (c) => c.json({ object: 'list', data: [model] }));
  api.get('/models/:id', (c) => {
    checkModel(c.req.param('id'));
    return c.json(model);
  });

  const checkModel = (requested: string) => checkServedModel(requested, modelId);
  // Read from the vocabulary once, when a request first asks for log-probabilities.
  let vocabularyNames: TokenNames | undefined;
  const tokenNames = () => (vocabularyNames ??= new TokenNames(tokenizer));

  api.post('/completions', async (c) => {
    const request = parseCompletionRequest(await readJsonObject(c), runtime.limits);
    checkModel(request.model);
    if (typeof request.prompt === 'string') return respond(c, COMPLETION, request, await runtime.begin({ ...request.raw, prompt: request.prompt }));
    let text: string;
    try {
      // The ids are fed as they are; their text only describes them (logs, the prompt checks).
      text = tokenizer.decode(request.prompt, { skipSpecialTokens: false });
    } catch (e) {
      throw new OpenAIParamError('prompt', `prompt: ${errorMessage(e)}`);
    }
    return respond(c, COMPLETION, request, await runtime.begin({ ...request.raw, prompt: text }, undefined, request.prompt));
  });

  api.post('/chat/completions', async (c) => {
    const request = parseChatRequest(await readJsonObject(c), runtime.limits);
    checkModel(request.model);
    if (!chat.available) throw new OpenAIParamError('messages', `${chat.problem} (to /v1/completions)`);
    // The template's special tokens (<|im_start|>, BOS...) become their ids; a message's stay text unless configured.
    const run = await chat.start(runtime, request.messages, request.raw, undefined, request.tools);
    // With tools the model may call (the template's format was read by start), the reply's calls are read out of its text.
    const calling = request.tools !== undefined && request.tools.choice !== 'none';
    return respond(c, calling ? chatWithTools(chat.toolCallFormat()) : CHAT, request, run);
  });

  api.all('*', (c) => {
    throw new AppError('NOT_FOUND', `no such endpoint: ${c.req.method} ${c.req.path}`);
  });

  function respond(c: Context, shape: ResponseShape, request: OpenAIRequest, run: Run) {
    const meta = { id: `${shape.idPrefix}${run.id.replaceAll('-', '')}`, created: Math.floor(Date.now() / 1000), model: modelId };
    const names = request.logprobs ? tokenNames() : undefined;
    if (!request.stream) return wholeResponse(shape, meta, run.events(c.req.raw.signal), names).then((body) => c.json(body));
    return streamSSE(c, async (stream) => {
      try {
        for await (const chunk of streamChunks(shape, meta, run.events(abortOn(stream)), request.includeUsage, names)) {
          await stream.writeSSE({ data: JSON.stringify(chunk) });
        }
      } catch (e) {
        await stream.writeSSE({ data: JSON.stringify(openAIError(e).body) });
      }
      await stream.writeSSE({ data: '[DONE]' });
    });
  }

  return api;
}

/** An AbortSignal that fires when the client goes away. */
function abortOn(stream: SSEStreamingApi): AbortSignal {
  const controller = new AbortController();
  stream.onAbort(() => controller.abort());
  return controller.signal;
}
