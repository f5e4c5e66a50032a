/**
 * The parameters of one generation, validated in one place for every entry point (web page, HTTP API,
 * gRPC). Anything out of range is an INVALID_ARGUMENT with a message that names the field as the API
 * documents it (`max_new_tokens`, `top_p`, `route_span`).
 */
import { AppError } from '../../shared/errors.ts';
import { CONVERSATION_MAX_CHARS, routingKeyProblem } from '../../shared/contract/routing-key.ts';
import { KIND_NAME, readPrivateSpans } from '../privacy/private-spans.ts';
import type { PrivateText } from '../privacy/private-values.ts';
import { DEFAULT_ROUTER_THRESHOLD } from '../../shared/contract/router-threshold.ts';
import { readConstraint, type ConstraintSpec, type RawConstraint } from '../constraint/constraint-spec.ts';

export const MODES = ['joint', 'small_only', 'llm_only'] as const;
export type Mode = (typeof MODES)[number];

export interface GenerationRequest {
  /** Text to continue; encoded with the edge tokenizer (a BOS token is added when the pack has one). */
  prompt: string;
  mode: Mode;
  /** τ in [0, 1]: a token is routed when its router score is below τ (joint mode). */
  threshold: number;
  maxNewTokens: number;
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  seed: number;
  /** Generation ends before the first occurrence of any of these strings. */
  stop: string[];
  /** Most tokens the cloud may return per routed step. */
  routeSpan: number;
  /**
   * Keep decoding from the edge's guess while a routed step is on the network (the output is the same
   * either way): forced on or off, or `auto`, decided at each routed position from measured figures.
   */
  speculate: boolean | 'auto';
  /**
   * The chat this generation belongs to, when the caller names one: the cloud sees it as the routing key,
   * so a chat's turns reach the worker that holds their shared prefix. Absent: the generation's request id.
   */
  conversation?: string;
  // Budgets the edge holds instead of a fixed τ (routing-cut.ts); each is present only when given. With a
  // share or token budget the cut on the router's scores moves to hold it; a wait budget lowers whatever cut
  // applies as the round trip or the cloud's load grows. Absent all three, τ decides exactly as before.
  /** Target share of generated tokens routed to the cloud, in (0, 1]. */
  routeShare?: number;
  /** Most cloud tokens the edge box spends per minute, over all its generations. */
  routeTokensPerMinute?: number;
  /** Most milliseconds a token may wait for the cloud. */
  routeWaitMs?: number;
  /**
   * Texts that must never reach the cloud (privacy/): the prompt's `private_spans`, or a conversation's
   * spans of its messages. Present only when there are some.
   */
  privateTexts?: PrivateText[];
  /** Detector kinds this request adds to the box's `--private-detect` (checked against the box's detector). */
  privateDetect?: string[];
  /** What the output must follow (a JSON schema, a grammar, a regex, a choice): held on every token (constraint/). */
  constraint?: ConstraintSpec;
  /**
   * Report each token's log-probability and this many most likely alternatives (0 to MAX_TOP_LOGPROBS), from
   * the model that chose it (loop/token-logprobs.ts). Present only when asked.
   */
  logprobs?: number;
}

/** Most alternatives a request may ask for at each token: what OpenAI's `top_logprobs` allows. */
export const MAX_TOP_LOGPROBS = 20;

/** The routing budgets of a request or of the edge's settings (the defaults of requests that name neither τ nor a budget). */
export type RouteBudget = Pick<GenerationRequest, 'routeShare' | 'routeTokensPerMinute' | 'routeWaitMs'>;

export const ROUTE_BUDGET_KEYS = ['routeShare', 'routeTokensPerMinute', 'routeWaitMs'] as const;

/** The largest token rate and wait budget a request or the edge's settings may give (a share is in (0, 1]). */
export const ROUTE_BUDGET_BOUNDS = { maxTokensPerMinute: 10_000_000, maxWaitMs: 600_000 } as const;

export interface GenerationLimits {
  maxPromptChars: number;
  maxNewTokens: number;
  maxRouteSpan: number;
}

export const DEFAULT_LIMITS: GenerationLimits = { maxPromptChars: 16_384, maxNewTokens: 1024, maxRouteSpan: 16 };

/**
 * Values not yet checked, under the request's own keys. The entry points fill it from their bodies with
 * `readGenerationRequest` (generation-request-fields.ts), which owns the documented names and turns form
 * text into numbers; here a number must already be one.
 */
export type RawGenerationRequest = Partial<Record<keyof GenerationRequest | 'privateSpans', unknown>>;

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

/** A raw value for a message: JSON, except the numbers JSON cannot spell (NaN would print as null). */
function show(raw: unknown): string {
  return typeof raw === 'number' ? String(raw) : JSON.stringify(raw);
}

/**
 * A lone UTF-16 surrogate: what a JSON `\ud800` escape can smuggle into a string. The transports decode
 * bytes strictly (invalid UTF-8 is refused there), so this is the one way left to get text that is not
 * Unicode. U+FFFD itself is a valid character and passes.
 */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** Refuses text that holds a lone surrogate, naming the field; every entry point that takes text checks it the same way. */
export function refuseLoneSurrogate(text: string, name: string): void {
  if (LONE_SURROGATE.test(text)) invalid(`${name} is not valid Unicode text (it holds a lone surrogate)`);
}

function numberField(raw: unknown, name: string, fallback: number): number {
  if (raw === undefined || raw === null) return fallback;
  if (typeof raw !== 'number' || !Number.isFinite(raw)) invalid(`${name} must be a number, got ${show(raw)}`);
  return raw;
}

function integerField(raw: unknown, name: string, fallback: number, min: number, max: number): number {
  const n = numberField(raw, name, fallback);
  if (!Number.isInteger(n) || n < min || n > max) invalid(`${name} must be an integer in [${min}, ${max}], got ${show(raw)}`);
  return n;
}

function rangeField(raw: unknown, name: string, fallback: number, min: number, max: number, minOpen = false): number {
  const n = numberField(raw, name, fallback);
  if (n > max || n < min || (minOpen && n === min)) invalid(`${name} must be in ${minOpen ? '(' : '['}${min}, ${max}], got ${show(raw)}`);
  return n;
}

/** `speculate`: a boolean forces it; `auto` (from a page form) leaves it to the measured figures. */
function speculateField(raw: unknown, fallback: boolean | 'auto'): boolean | 'auto' {
  if (raw === undefined || raw === null) return fallback;
  if (typeof raw !== 'boolean' && raw !== 'auto') invalid(`speculate must be true or false, got ${show(raw)}`);
  return raw as boolean | 'auto';
}

/** `private_detect`: absent, or kind names (which kinds the box knows is the detector's to say). */
function privateDetectField(raw: unknown): string[] {
  if (raw === undefined || raw === null) return [];
  const kinds: unknown[] = Array.isArray(raw) ? raw : [raw];
  if (kinds.length > 16 || !kinds.every((k): k is string => typeof k === 'string' && KIND_NAME.test(k))) {
    invalid(`private_detect must be at most 16 kind names such as "email" or "phone", got ${show(raw)}`);
  }
  return [...new Set(kinds)];
}

/** The request's private texts: its prompt's spans, and those an entry point resolved already (a conversation's). */
function privateFields(raw: RawGenerationRequest, prompt: string): Pick<GenerationRequest, 'privateTexts' | 'privateDetect'> {
  const texts = [...readPrivateSpans(raw.privateSpans, prompt, 'private_spans'), ...((raw.privateTexts as PrivateText[] | undefined) ?? [])];
  const detect = privateDetectField(raw.privateDetect);
  return { ...(texts.length > 0 ? { privateTexts: texts } : {}), ...(detect.length > 0 ? { privateDetect: detect } : {}) };
}

/** The request's constraint fields (each entry point gathers them under `constraint`), read into one spec. */
function constraintField(raw: unknown): Pick<GenerationRequest, 'constraint'> {
  if (raw === undefined || raw === null) return {};
  const constraint = readConstraint(raw as RawConstraint);
  return constraint ? { constraint } : {};
}

/** `conversation`: absent, or a routing key the cloud can pass on as a header value (routing-key.ts). */
function conversationField(raw: unknown): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string') invalid(`conversation must be a string, got ${show(raw)}`);
  const problem = routingKeyProblem(raw, 'conversation', CONVERSATION_MAX_CHARS);
  if (problem) invalid(problem);
  return raw;
}

/**
 * The request's budgets, checked; the edge's `defaults` apply only to a request that names neither a
 * threshold nor any budget: one that names τ gets exactly τ, as before budgets existed.
 */
function budgetFields(raw: RawGenerationRequest, defaults: RouteBudget): RouteBudget {
  const named = raw.threshold != null || ROUTE_BUDGET_KEYS.some((key) => raw[key] != null);
  const source: Partial<Record<keyof RouteBudget, unknown>> = named ? raw : defaults;
  const budget: RouteBudget = {};
  if (source.routeShare != null) budget.routeShare = rangeField(source.routeShare, 'route_share', 0, 0, 1, true);
  const { maxTokensPerMinute, maxWaitMs } = ROUTE_BUDGET_BOUNDS;
  if (source.routeTokensPerMinute != null)
    budget.routeTokensPerMinute = integerField(source.routeTokensPerMinute, 'route_tokens_per_minute', 0, 1, maxTokensPerMinute);
  if (source.routeWaitMs != null) budget.routeWaitMs = integerField(source.routeWaitMs, 'route_wait_ms', 0, 1, maxWaitMs);
  return budget;
}

/**
 * `defaultThreshold` is what a request without a threshold gets: the edge passes its router's.
 * `defaultSpeculate` likewise: the edge passes its `--speculate` setting (tools that say nothing get off).
 * `defaultBudget`: the edge's `--route-*` settings, for requests that name neither τ nor a budget.
 */
export function parseGenerationRequest(
  raw: RawGenerationRequest,
  limits: GenerationLimits = DEFAULT_LIMITS,
  defaultThreshold = DEFAULT_ROUTER_THRESHOLD,
  defaultSpeculate: boolean | 'auto' = false,
  defaultBudget: RouteBudget = {},
): GenerationRequest {
  const prompt = raw.prompt;
  if (typeof prompt !== 'string') invalid('prompt must be a string');
  if (prompt.trim() === '') invalid('prompt must not be empty');
  if (prompt.length > limits.maxPromptChars) {
    invalid(`prompt is ${prompt.length} characters; the limit is ${limits.maxPromptChars}`);
  }
  refuseLoneSurrogate(prompt, 'prompt');
  const mode = raw.mode ?? 'joint';
  if (typeof mode !== 'string' || !(MODES as readonly string[]).includes(mode)) {
    invalid(`mode must be one of ${MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
  const stopRaw = raw.stop ?? [];
  const stop: unknown[] = Array.isArray(stopRaw) ? stopRaw : [stopRaw];
  if (!stop.every((s): s is string => typeof s === 'string') || stop.length > 8) {
    invalid('stop must be at most 8 non-empty strings');
  }
  // An empty stop string matches everywhere, so it cannot mean anything; it is refused rather than dropped.
  const empty = stop.indexOf('');
  if (empty >= 0) invalid(`stop[${empty}] is empty: a stop string needs at least one character`);
  for (const s of stop) refuseLoneSurrogate(s, 'stop');
  const conversation = conversationField(raw.conversation);
  return {
    prompt,
    mode: mode as Mode,
    threshold: rangeField(raw.threshold, 'threshold', defaultThreshold, 0, 1),
    maxNewTokens: integerField(raw.maxNewTokens, 'max_new_tokens', 64, 1, limits.maxNewTokens),
    temperature: rangeField(raw.temperature, 'temperature', 0, 0, 5),
    topP: rangeField(raw.topP, 'top_p', 1, 0, 1, true),
    seed: integerField(raw.seed, 'seed', 0, 0, 2 ** 32 - 1),
    stop,
    routeSpan: integerField(raw.routeSpan, 'route_span', 1, 1, limits.maxRouteSpan),
    speculate: speculateField(raw.speculate, defaultSpeculate),
    // Only when named: a request without one compares equal to one from before the field existed.
    ...(conversation === undefined ? {} : { conversation }),
    ...budgetFields(raw, defaultBudget),
    ...privateFields(raw, prompt),
    ...constraintField(raw.constraint),
    ...(raw.logprobs == null ? {} : { logprobs: integerField(raw.logprobs, 'logprobs', 0, 0, MAX_TOP_LOGPROBS) }),
  };
}
