/**
 * What the decoding loop needs from the cloud, independent of transport. The gRPC client implements it
 * over the edge ↔ cloud stream; tests may implement it in process with the real cloud pack.
 *
 * A session lives for one generation. The loop always passes the whole context it has; the session
 * sends the cloud only what the cloud has not seen yet (token ids and their routing sources).
 */

import type { TokenAlternative, TokenSource } from '../shared/contract-vocabulary.ts';

export interface CloudStepRequest {
  /** Every token id of the generation so far: prompt, then generated tokens. */
  context: readonly number[];
  /** The source of each id in `context` (same length): the routing history. */
  sources: readonly TokenSource[];
  /** Index of the token being asked for, counted from the first generated token. */
  tokenIndex: number;
  /** Most tokens the cloud may return for this step (the route span), at least 1. */
  maxTokens: number;
  temperature: number;
  topP: number;
  /** Seed for the cloud's sampler; with temperature 0 decoding is greedy and it does not matter. */
  seed?: number;
  /** Token ids that end generation; the cloud stops a span at one of them. */
  stopTokenIds: readonly number[];
  /** The router's score and threshold that caused the routing, for the cloud's records. */
  routerScore: number;
  threshold: number;
  /** The edge model's hidden state for this position: only sent when the edge is configured to. */
  hiddenState?: Float32Array;
  /** Alternatives per token to return (0 = none). */
  topLogprobs: number;
  signal?: AbortSignal;
}

export interface CloudStepReply {
  /** Between 1 and maxTokens token ids. */
  tokens: number[];
  text: string;
  logprobs: number[];
  /** Per returned token, the top alternatives (empty unless asked). */
  topAlternatives: TokenAlternative[][];
  /** Prompt tokens the backend served from its cache for this step. */
  cachedTokens: number;
  /** Time the backend spent computing, and the shim's own time around it, in milliseconds. */
  backendMs: number;
  shimMs: number;
}

export interface CloudSession {
  next(request: CloudStepRequest): Promise<CloudStepReply>;
  /** Ends the session on the cloud side and frees it; safe to call twice. */
  close(): Promise<void>;
}

export type CloudConnectionState = 'idle' | 'connecting' | 'ready' | 'unavailable' | 'circuit-open';

export interface CloudClient {
  /** Opens a session lazily: nothing is sent until the first `next`. */
  openSession(options: { requestId: string; signal?: AbortSignal }): CloudSession;
  state(): CloudConnectionState;
  close(): Promise<void>;
}

/**
 * `inner` with every step passed through `step`, which calls `next` to reach the cloud; sessions, state and
 * close stay `inner`'s. For measuring, delaying or holding steps without touching the transport.
 *
 * @example
 * const slow = interceptSteps(cloud, async (request, next) => (await Bun.sleep(50), next(request)));
 */
export function interceptSteps(
  inner: CloudClient,
  step: (request: CloudStepRequest, next: (request: CloudStepRequest) => Promise<CloudStepReply>) => Promise<CloudStepReply>,
): CloudClient {
  return {
    openSession(options) {
      const session = inner.openSession(options);
      return { next: (request) => step(request, (r) => session.next(r)), close: () => session.close() };
    },
    state: () => inner.state(),
    close: () => inner.close(),
  };
}
