/**
 * What one generation yields: a `token` event per emitted token and one final `done` event. Entry points
 * (HTTP, gRPC, OpenAI) serialize these; the loop knows nothing of them.
 */
import type { TokenAlternative, TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import type { GenerationMetrics } from './generation-metrics.ts';

export interface TokenEvent {
  type: 'token';
  /** 0-based index among generated tokens. */
  index: number;
  id: number;
  /** The text this token adds (may be empty while a multi-byte character or a possible stop string is held back). */
  text: string;
  source: Exclude<TokenSource, 'prompt'>;
  /** Router score at this position; null for tokens the router did not see (llm_only, later tokens of a span). */
  score: number | null;
  timings: { slmMs: number; routerMs: number; cloudMs: number };
  /** Why the cloud could not serve a routed token (source `fallback`). */
  cloudError?: string;
  /**
   * The token's log-probability under the model that chose it, and the most likely alternatives there
   * (token-logprobs.ts): present only when the request asked for `logprobs`.
   */
  logprob?: number | null;
  topLogprobs?: TokenAlternative[];
}

export type FinishReason = 'eos' | 'stop' | 'length' | 'context' | 'cancelled';

export interface DoneEvent {
  type: 'done';
  finishReason: FinishReason;
  /** The generated text; exactly the concatenation of the token events' texts. */
  text: string;
  metrics: GenerationMetrics;
  requestId: string;
  router: string;
  /**
   * What the cloud saw: the text of the context the shim held at the end (the prompt and the generation up to
   * its last routed step, each private value as its placeholder); empty when nothing was routed.
   */
  cloudText: string;
}

export type GenerationEvent = TokenEvent | DoneEvent;
