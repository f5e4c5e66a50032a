/**
 * OpenAI's `/v1/completions` and `/v1/chat/completions` request bodies, validated field by field with
 * OpenAI's names and ranges, and mapped onto the edge's own generation request. The routing fields are
 * vendor extensions (as vLLM documents its extra parameters): `routing_mode`, `routing_threshold` (τ),
 * `route_span` and the routing budgets `route_share`, `route_tokens_per_minute` and `route_wait_ms`;
 * without them a request gets the edge's defaults (joint routing at the default τ, or the edge's
 * --route-* budgets). OpenAI's
 * `prompt_cache_key` names the conversation (the cloud's routing key); `user` is checked and unused.
 * Privacy is a vendor extension too: `private_spans` of a text prompt (completions) or of each message's
 * content (chat), and `private_detect` (privacy/private-spans.ts has the span forms). Spans of a message whose
 * content is a list of text parts count code points of the parts' texts joined with newlines, the text the
 * edge reads; a prompt of token ids takes no spans (there is no text of the caller's to point into). Chat takes
 * OpenAI's function calling too: `tools`, `tool_choice` and `parallel_tool_calls` (openai-tools.ts) and the
 * messages' `tool_calls` and `tool_call_id` (openai-messages.ts).
 *
 * @example
 * const request = parseCompletionRequest({ model: 'stories260k-3l', prompt: 'Once', max_tokens: 8 }, runtime.limits);
 * runtime.start(request.raw);
 */
import { randomInt } from 'node:crypto';
import { CONVERSATION_MAX_CHARS, routingKeyProblem } from '../../../shared/contract/routing-key.ts';
import { MAX_TOP_LOGPROBS, MODES, ROUTE_BUDGET_BOUNDS, type GenerationLimits, type RawGenerationRequest } from '../../request/generation-request.ts';
import { OpenAIParamError } from './openai-errors.ts';
import { OpenAIFields, show } from './openai-fields.ts';
import { CONSTRAINT_FIELDS, readOpenAIConstraint } from './openai-constraint.ts';
import type { EdgeChatMessage } from '../../chat/chat-messages.ts';
import type { PrivateText } from '../../privacy/private-values.ts';
import { parseMessages, spansOf } from './openai-messages.ts';
import { readOpenAITools, TOOL_FIELDS } from './openai-tools.ts';
import type { ChatTools } from '../../chat/edge-chat.ts';

/** What both endpoints share once parsed. */
export interface OpenAIRequest {
  model: string;
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk with the usage and no choices. */
  includeUsage: boolean;
  /** The reply carries the tokens' log-probabilities (`raw.logprobs` says how many alternatives). */
  logprobs: boolean;
  /** The edge's request, less its prompt (the endpoint supplies that). */
  raw: RawGenerationRequest;
}

export interface CompletionRequest extends OpenAIRequest {
  /** Text, or token ids of the edge model's vocabulary. */
  prompt: string | number[];
}

export interface ChatRequest extends OpenAIRequest {
  /** With each message's private texts (`messages[i].private_spans`). */
  messages: EdgeChatMessage[];
  /** `tools`, `tool_choice` and `parallel_tool_calls` (openai-tools.ts). */
  tools?: ChatTools;
}

/** OpenAI's default for /v1/completions; chat completions run to the edge's limit (or the context's end). */
const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;
/** OpenAI's documented limit on stop sequences. */
const MAX_STOP = 4;

const ROUTE_BUDGET_FIELDS = ['route_share', 'route_tokens_per_minute', 'route_wait_ms'];
const COMMON = [
  'model',
  'stream',
  'stream_options',
  'max_tokens',
  'temperature',
  'top_p',
  'stop',
  'seed',
  'n',
  'user',
  'prompt_cache_key',
  'routing_mode',
  'routing_threshold',
  'route_span',
  ...ROUTE_BUDGET_FIELDS,
  'private_detect',
  ...CONSTRAINT_FIELDS,
];
const NEUTRAL = { presence_penalty: [0], frequency_penalty: [0] };

export function parseCompletionRequest(body: Record<string, unknown>, limits: GenerationLimits): CompletionRequest {
  const fields = new OpenAIFields(body, [...COMMON, 'prompt', 'private_spans', 'logprobs'], { ...NEUTRAL, echo: [false], best_of: [1] });
  const common = parseCommon(fields, limits, fields.integer('max_tokens', 1, limits.maxNewTokens) ?? COMPLETIONS_DEFAULT_MAX_TOKENS);
  const prompt = parsePrompt(fields.get('prompt'));
  const privateTexts = promptSpans(fields.get('private_spans'), prompt);
  // The legacy API's `logprobs` is the number of alternatives (0: the chosen token's figure only).
  const logprobs = fields.integer('logprobs', 0, MAX_TOP_LOGPROBS);
  return {
    ...common,
    logprobs: logprobs !== undefined,
    raw: { ...common.raw, ...(privateTexts.length > 0 ? { privateTexts } : {}), ...(logprobs === undefined ? {} : { logprobs }) },
    prompt,
  };
}

export function parseChatRequest(body: Record<string, unknown>, limits: GenerationLimits): ChatRequest {
  // Spans of the whole request would point into the rendered prompt, which the caller never sees.
  if (Object.hasOwn(body, 'private_spans') && body.private_spans !== null) {
    throw new OpenAIParamError('private_spans', 'on chat completions, mark private spans in each message (messages[i].private_spans), not in the request');
  }
  const fields = new OpenAIFields(body, [...COMMON, 'messages', 'max_completion_tokens', 'logprobs', 'top_logprobs', ...TOOL_FIELDS], NEUTRAL);
  // max_completion_tokens is the newer name of max_tokens; it wins when both are given, as in OpenAI's API.
  const maxTokens = fields.integer('max_completion_tokens', 1, limits.maxNewTokens) ?? fields.integer('max_tokens', 1, limits.maxNewTokens);
  const common = parseCommon(fields, limits, maxTokens ?? limits.maxNewTokens);
  const tools = readOpenAITools(fields);
  // Chat's `logprobs` is a switch and `top_logprobs` the number of alternatives, which needs the switch on.
  const logprobs = fields.boolean('logprobs') ?? false;
  const top = fields.integer('top_logprobs', 0, MAX_TOP_LOGPROBS);
  if (top !== undefined && !logprobs) throw new OpenAIParamError('top_logprobs', 'top_logprobs needs logprobs: true');
  return {
    ...common,
    logprobs,
    raw: { ...common.raw, ...(logprobs ? { logprobs: top ?? 0 } : {}) },
    messages: parseMessages(fields.get('messages')),
    ...(tools ? { tools } : {}),
  };
}

function parseCommon(fields: OpenAIFields, limits: GenerationLimits, maxNewTokens: number): Omit<OpenAIRequest, 'logprobs'> {
  const model = fields.string('model');
  if (model === undefined) throw new OpenAIParamError('model', 'model is required (GET /v1/models lists it)');
  const n = fields.get('n');
  if (n !== undefined && n !== 1) throw new OpenAIParamError('n', `n must be 1: this edge generates one choice per request, got ${show(n)}`);
  // Checked, then unused: it identifies an end user to OpenAI's abuse monitoring, which an edge box has none of.
  fields.string('user');
  const stream = fields.boolean('stream') ?? false;
  const conversation = parseConversation(fields.string('prompt_cache_key'));
  const privateDetect = parsePrivateDetect(fields.get('private_detect'));
  const constraint = readOpenAIConstraint(fields);
  return {
    model,
    stream,
    includeUsage: parseStreamOptions(fields.get('stream_options'), stream),
    raw: {
      mode: fields.oneOf('routing_mode', MODES),
      threshold: fields.number('routing_threshold', 0, 1),
      routeSpan: fields.integer('route_span', 1, limits.maxRouteSpan),
      // The JSON API's own bounds (generation-request.ts), checked here to name the field OpenAI's way.
      routeShare: fields.number('route_share', 0, 1, true),
      routeTokensPerMinute: fields.integer('route_tokens_per_minute', 1, ROUTE_BUDGET_BOUNDS.maxTokensPerMinute),
      routeWaitMs: fields.integer('route_wait_ms', 1, ROUTE_BUDGET_BOUNDS.maxWaitMs),
      maxNewTokens,
      // OpenAI's defaults: temperature 1, and a fresh seed for every request that names none.
      temperature: fields.number('temperature', 0, 2) ?? 1,
      topP: fields.number('top_p', 0, 1, true),
      seed: fields.integer('seed', 0, 2 ** 32 - 1) ?? randomInt(2 ** 32 - 1),
      stop: parseStop(fields.get('stop')),
      ...(privateDetect === undefined ? {} : { privateDetect }),
      ...(conversation === undefined ? {} : { conversation }),
      ...(constraint === undefined ? {} : { constraint: constraint.raw }),
    },
  };
}

/**
 * OpenAI's `prompt_cache_key`: the key it documents for requests that share a prefix, which is what the
 * edge's `conversation` is. It becomes the cloud's routing key, so a chat's turns reach one cloud worker.
 */
function parseConversation(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  const problem = routingKeyProblem(key, 'prompt_cache_key', CONVERSATION_MAX_CHARS);
  if (problem) throw new OpenAIParamError('prompt_cache_key', problem);
  return key;
}

function parseStreamOptions(value: unknown, stream: boolean): boolean {
  if (value === undefined) return false;
  if (!stream) throw new OpenAIParamError('stream_options', 'stream_options is only allowed with stream: true');
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new OpenAIParamError('stream_options', `stream_options must be an object, got ${show(value)}`);
  const options = new OpenAIFields(value as Record<string, unknown>, ['include_usage']);
  return options.boolean('include_usage') ?? false;
}

/** Detector kinds: their names are the edge's to check (generation-request.ts), the shape is checked here to name the field. */
function parsePrivateDetect(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const kinds = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(kinds) || !kinds.every((k) => typeof k === 'string')) {
    throw new OpenAIParamError('private_detect', `private_detect must be a list of detector kinds such as "email" or "phone", got ${show(value)}`);
  }
  return kinds as string[];
}

/** A prompt's `private_spans`, as texts; refused with `param` named, and for a prompt of token ids. */
function promptSpans(value: unknown, prompt: string | number[]): PrivateText[] {
  if (value === undefined) return [];
  if (typeof prompt !== 'string') {
    throw new OpenAIParamError(
      'private_spans',
      'private_spans mark stretches of a text prompt; a prompt of token ids has no text of yours to point into: send the text (private_detect still applies to ids)',
    );
  }
  return spansOf(value, prompt, 'private_spans');
}

function parseStop(value: unknown): string[] {
  if (value === undefined) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length > MAX_STOP || !list.every((s) => typeof s === 'string' && s !== '')) {
    throw new OpenAIParamError('stop', `stop must be a non-empty string or a list of at most ${MAX_STOP} of them, got ${show(value)}`);
  }
  return list as string[];
}

/**
 * OpenAI's shapes: a string, a list of token ids, or a batch of either. A batch of several is refused and
 * a batch of one is unwrapped, once: a list nested deeper is no prompt (it was unwrapped level by level).
 */
function parsePrompt(value: unknown): string | number[] {
  if (value === undefined) throw new OpenAIParamError('prompt', 'prompt is required');
  if (Array.isArray(value) && value.length === 1 && (typeof value[0] === 'string' || Array.isArray(value[0]))) return parseOnePrompt(value[0]);
  if (Array.isArray(value) && value.length > 1 && value.every((p) => typeof p === 'string' || Array.isArray(p))) {
    throw new OpenAIParamError('prompt', `prompt holds ${value.length} prompts; this edge answers one per request`);
  }
  return parseOnePrompt(value);
}

function parseOnePrompt(value: unknown): string | number[] {
  if (typeof value === 'string') {
    if (value.trim() === '') throw new OpenAIParamError('prompt', 'prompt must not be empty');
    return value;
  }
  if (Array.isArray(value) && value.length > 0 && value.every((id) => Number.isInteger(id) && id >= 0)) return value as number[];
  throw new OpenAIParamError('prompt', 'prompt must be a string or a non-empty list of token ids (non-negative integers), or a list of one of them');
}
