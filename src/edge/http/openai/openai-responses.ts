/**
 * The edge's generation events in OpenAI's response shapes: a whole `text_completion` /
 * `chat.completion`, or the chunks of a stream. Each streamed token is one chunk (its text may be empty
 * while a multi-byte character or a possible stop string is held back), and its choice carries the
 * vendor extension `routing`: the token's id, its source (`slm`, `llm` or `fallback`) and the router's
 * score. `usage` adds `routed_tokens` (chosen by the cloud model), `fallback_tokens` (routed, but
 * decided by the edge model because the cloud could not answer) and `routing`: the cut that decided the
 * routing (its policy, the budgets given, the cut and the realized share; the done event's report), and
 * `cloud`: what left the box for the cloud (tokens, bytes, hidden-state bytes, steps, streams, placeholders,
 * withheld steps; cloud-disclosure.ts). The choice that finishes (the whole response's, or a stream's last
 * choice chunk) carries `cloud_text`: the text the cloud saw, private values as their placeholders (empty
 * when nothing was routed). It is on the choice rather than in `usage`, which a stream sends only on request
 * and which holds counts.
 *
 * @example
 * for await (const chunk of streamChunks(CHAT, meta, run.events(signal), true)) write(JSON.stringify(chunk));
 */
import type { DoneEvent, FinishReason, GenerationEvent, TokenEvent } from '../../loop/decoder-loop.ts';
import type { GenerationMetrics } from '../../loop/generation-metrics.ts';
import { snakeCaseKeys } from '../snake-case-json.ts';
import { chatLogprobs, completionLogprobs, type TokenNames } from './openai-logprobs.ts';

export interface ResponseMeta {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** As OpenAI reports it: prompt tokens served from the prompt cache (the edge's, restored instead of prefilled). */
  prompt_tokens_details: { cached_tokens: number };
  routed_tokens: number;
  fallback_tokens: number;
  /** The generation's routing report in snake_case (`policy`, `cut`, `realized_share`, `share`, ...). */
  routing?: Record<string, unknown>;
  /** What left the box for the cloud, in snake_case (`tokens_sent`, `bytes_sent`, `placeholders`, ...). */
  cloud: CloudUsage;
  /** With a constraint: `cloud_tokens_replaced`, `constrained_fallbacks`, `span_tokens_dropped` (constraint/). */
  constraint?: Record<string, number>;
}

export interface CloudUsage {
  tokens_sent: number;
  bytes_sent: number;
  hidden_state_bytes: number;
  steps: number;
  streams: number;
  placeholders: number;
  withheld_steps: number;
  gate_blocked_steps: number;
  pseudonym_ms: number;
}

export interface RoutingExtension {
  token_id: number;
  source: TokenEvent['source'];
  /** null for tokens the router did not score (llm_only, later tokens of a routed span). */
  score: number | null;
  /** Why the cloud could not serve a routed token (source `fallback`). */
  cloud_error?: string;
}

type OpenAIFinish = 'stop' | 'length';

/** How one endpoint spells its objects and choices (a chat with tools reads calls out of the text: openai-tool-calls.ts). */
export interface ResponseShape {
  object: string;
  chunkObject: string;
  idPrefix: string;
  choice(text: string, finish: OpenAIFinish): Record<string, unknown>;
  /** The chunks' choices for text that arrived (none while it is held back), and with `finish`, the last. */
  chunkChoices(text: string, finish: OpenAIFinish | null): Record<string, unknown>[];
  /** Chunks' choices before the first token (chat announces the assistant's role). */
  opening: Record<string, unknown>[];
  /** The choice's `logprobs` for `events`, whose text starts at `offset` in the choice's text. */
  logprobs(events: readonly TokenEvent[], names: TokenNames, offset: number): Record<string, unknown>;
}

export const COMPLETION: ResponseShape = {
  object: 'text_completion',
  chunkObject: 'text_completion',
  idPrefix: 'cmpl-',
  choice: (text, finish) => ({ index: 0, text, logprobs: null, finish_reason: finish }),
  chunkChoices: (text, finish) => [{ index: 0, text, logprobs: null, finish_reason: finish }],
  opening: [],
  logprobs: completionLogprobs,
};

export const CHAT: ResponseShape = {
  object: 'chat.completion',
  chunkObject: 'chat.completion.chunk',
  idPrefix: 'chatcmpl-',
  choice: (text, finish) => ({ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finish }),
  chunkChoices: (text, finish) => [
    {
      index: 0,
      delta: finish === null ? { content: text } : text ? { content: text } : {},
      logprobs: null,
      finish_reason: finish,
    },
  ],
  opening: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
  logprobs: (events, names) => chatLogprobs(events, names),
};

/**
 * OpenAI has two reasons: `stop` (an end-of-turn or EOS token, or a stop string) and `length` (the token
 * budget or the context window). A cancelled generation has no client left to read its reason.
 */
export function finishReason(reason: FinishReason): OpenAIFinish {
  return reason === 'length' || reason === 'context' ? 'length' : 'stop';
}

export function usage(metrics: GenerationMetrics): Usage {
  const report = metrics.budget;
  return {
    prompt_tokens: metrics.promptTokens,
    completion_tokens: metrics.tokens,
    total_tokens: metrics.promptTokens + metrics.tokens,
    prompt_tokens_details: { cached_tokens: metrics.cachedTokens },
    routed_tokens: metrics.routed,
    fallback_tokens: metrics.fallback,
    ...(report ? { routing: snakeCaseKeys(report) as Record<string, unknown> } : {}),
    cloud: snakeCaseKeys(metrics.cloud) as CloudUsage,
    ...(metrics.constraint ? { constraint: snakeCaseKeys(metrics.constraint) as Record<string, number> } : {}),
  };
}

function routing(event: TokenEvent): RoutingExtension {
  return { token_id: event.id, source: event.source, score: event.score, ...(event.cloudError ? { cloud_error: event.cloudError } : {}) };
}

/** The whole response, once the generation is done; with every token's log-probabilities when `names` is given (the request asked). */
export async function wholeResponse(
  shape: ResponseShape,
  meta: ResponseMeta,
  events: AsyncIterable<GenerationEvent>,
  names?: TokenNames,
): Promise<Record<string, unknown>> {
  let done: DoneEvent | undefined;
  const tokens: TokenEvent[] = [];
  for await (const event of events) {
    if (event.type === 'done') done = event;
    else if (names) tokens.push(event);
  }
  if (!done) throw new Error('the generation ended without a final event');
  const choice = shape.choice(done.text, finishReason(done.finishReason));
  return {
    id: meta.id,
    object: shape.object,
    created: meta.created,
    model: meta.model,
    choices: [{ ...choice, ...(names ? { logprobs: shape.logprobs(tokens, names, 0) } : {}), cloud_text: done.cloudText }],
    usage: usage(done.metrics),
  };
}

/** The chunks of a stream: the opening, one per token, the finish (with any text held back until the end), then the usage when asked for. */
export async function* streamChunks(
  shape: ResponseShape,
  meta: ResponseMeta,
  events: AsyncIterable<GenerationEvent>,
  includeUsage: boolean,
  names?: TokenNames,
): AsyncGenerator<Record<string, unknown>> {
  // With include_usage every chunk carries `usage: null` and only the last one the figures, as OpenAI does.
  const chunk = (choices: Record<string, unknown>[], extra: Record<string, unknown> = {}) => ({
    id: meta.id,
    object: shape.chunkObject,
    created: meta.created,
    model: meta.model,
    choices,
    ...(includeUsage ? { usage: null } : {}),
    ...extra,
  });
  for (const choice of shape.opening) yield chunk([choice]);
  let sent = '';
  for await (const event of events) {
    if (event.type === 'token') {
      // Every token has its chunk, for its routing and log-probabilities: one with an empty delta where its text is held back.
      const [first = { index: 0, delta: {}, logprobs: null, finish_reason: null }, ...more] = shape.chunkChoices(event.text, null);
      const logprobs = names ? { logprobs: shape.logprobs([event], names, sent.length) } : {};
      sent += event.text;
      yield chunk([{ ...first, ...logprobs, routing: routing(event) }]);
      for (const choice of more) yield chunk([choice]);
      continue;
    }
    // The final text can only have grown: a flushed partial character, or text held back for a stop string that never came.
    const choices = shape.chunkChoices(event.text.slice(sent.length), finishReason(event.finishReason));
    for (const choice of choices.slice(0, -1)) yield chunk([choice]);
    yield chunk([{ ...choices.at(-1)!, cloud_text: event.cloudText }]);
    if (includeUsage) yield chunk([], { usage: usage(event.metrics) });
  }
}
