/**
 * What the decoding loop needs from the cloud, independent of transport. The gRPC client implements it
 * over the edge ↔ cloud stream; tests may implement it in process with the real cloud pack.
 *
 * A conversation lives for one generation. The loop always passes the whole context it has; the
 * conversation sends the cloud only what the cloud has not seen yet (token ids and their routing sources).
 * Over gRPC it is carried by one routing session (one stream); when that breaks, the conversation opens
 * another with the whole context, so one conversation may span several sessions.
 *
 * Words: a *session* is the contract's (proto/cloud_router.proto, one stream, the shim's RoutingSession);
 * a *conversation* is the edge's side of one generation's talk with the cloud; a *sequence* is a growing
 * token context with its cached state (DecoderSequence's KV cache, a backend's BackendSequence); an
 * *inference session* is onnxruntime's.
 */

import type { TokenAlternative, TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import type { CloudDisclosure } from './cloud-disclosure.ts';
import type { CloudGate } from './cloud-gate.ts';

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
  /**
   * Most tokens the generation may still add (its length and context limits): a reply that restores a private
   * value may exceed `maxTokens` up to it, since a value cut short would be finished by a weaker model.
   */
  room?: number;
  /**
   * Sent while the previous step is still in flight, assuming its reply is the token `context` holds at that
   * step's position (the edge's guess). The reply is `skipped` when the assumption fails. One such step may
   * be in flight beside a step; a step that is not conditional waits for every earlier reply.
   */
  conditional?: boolean;
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
  /** A conditional step whose assumption failed: nothing was computed and `tokens` is empty. */
  skipped?: boolean;
  /**
   * The shim refused the step because its backend is saturated (it would have waited past the step's
   * deadline): nothing was computed and `tokens` is empty. The edge decides the position itself; this is
   * not a cloud failure (the breaker does not count it).
   */
  overloaded?: boolean;
  /** The shim's load when it answered (absent from a shim that does not report it). */
  load?: CloudLoad;
  /**
   * Not sent: the context ends where a private value may be under way (privacy/pseudonymised-conversation.ts),
   * so the edge decides the position itself. Not a cloud failure; `tokens` is empty.
   */
  withheld?: boolean;
  /**
   * The tokens may run past `maxTokens`, up to the request's `room`: they hold a private value put back in place
   * of the cloud's placeholder, or tokens the privacy layer read ahead to see whether a placeholder came.
   */
  pastSpan?: boolean;
}

/** The cloud's load as the shim reports it with every step result (proto `ShimLoad`). */
export interface CloudLoad {
  /** Steps the shim's backend is computing now, this one included. */
  stepsInFlight: number;
  /** Steps waiting for a backend slot behind them. */
  stepsQueued: number;
  /** Recent backend time of one step (a moving average), in milliseconds; 0 before the first. */
  backendMs: number;
}

/** A reply without tokens: nothing was computed. */
function emptyReply(): CloudStepReply {
  return { tokens: [], text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: 0, shimMs: 0 };
}

/** The reply to a conditional step whose assumed token was not the previous step's. */
export function skippedReply(): CloudStepReply {
  return { ...emptyReply(), skipped: true };
}

/** The reply to a step whose context ends inside a possible private value: not sent, the edge decides. */
export function withheldReply(): CloudStepReply {
  return { ...emptyReply(), withheld: true };
}

export interface CloudConversation {
  next(request: CloudStepRequest): Promise<CloudStepReply>;
  /**
   * Sends `request.context` ahead of the first step, for the cloud to prefill while the edge decodes (proto
   * `open.prefill`); the first `next` then sends only what was added since. Best-effort and not awaited: a
   * conversation that has a stream already, a cloud that refuses, or a gate that stops the context sends
   * nothing, and the first step opens its stream as it would have. Absent: the conversation cannot.
   */
  prefill?(request: CloudStepRequest): void;
  /**
   * Sends what `request.context` adds to what the conversation sent, between steps, for the cloud to compute
   * before the next one (proto `extend`); the next `next` then sends only what was added since. Best-effort
   * and not awaited, like `prefill`: without a stream, with a step in flight, or where the gate stops it,
   * nothing is sent and the next step carries it. Absent: the conversation cannot.
   */
  extend?(request: CloudStepRequest): void;
  /** Ends the conversation (its session on the cloud side) and frees it; safe to call twice. */
  close(): Promise<void>;
}

/**
 * `refused`: the shim answers, but turned down this edge's token on its last routed step or credentials
 * check (a wrong --cloud-token); every routed token falls back until a step is answered.
 * `mismatch`: the shim's tokenizer is not the edge model's (its ids mean other tokens); nothing is routed
 * to it, every routed token falls back, until the shim reports the edge model's tokenizer.
 */
export type CloudConnectionState = 'idle' | 'connecting' | 'ready' | 'unavailable' | 'circuit-open' | 'refused' | 'mismatch';
export const CLOUD_CONNECTION_STATES: readonly CloudConnectionState[] = ['idle', 'connecting', 'ready', 'unavailable', 'circuit-open', 'refused', 'mismatch'];

/** The states in which every new stream is refused at once, with nothing sent: no step is worth sending ahead. */
export function refusesSteps(state: CloudConnectionState | undefined): boolean {
  return state === 'circuit-open' || state === 'mismatch';
}

/** Who a conversation is: the generation's id, and the key that keeps its cloud steps on one worker. */
export interface ConversationOptions {
  /** The generation's id, the same on every stream the conversation opens. */
  requestId: string;
  /** The routing key when the caller named a conversation; absent, the shim uses `requestId`. */
  routingKey?: string;
  /**
   * Deadline of each step of this conversation, when it is shorter than the client's: a generation under a
   * wait budget gives the cloud no longer than the budget (the shim refuses a step it could not start in
   * time as overloaded instead of queuing it).
   */
  stepTimeoutMs?: number;
  signal?: AbortSignal;
  /** Counts what the conversation sends and what the shim holds at the end (for the generation's record of what left). */
  disclosure?: CloudDisclosure;
  /**
   * What every message of the conversation passes on its way out (cloud-gate.ts): `CloudGate.OPEN` for a
   * generation without private values, the privacy layer's guarding gate for one with them.
   */
  gate: CloudGate;
}

export interface CloudClient {
  /** Opens a conversation lazily: nothing is sent until the first `next`. */
  openConversation(options: ConversationOptions): CloudConversation;
  state(): CloudConnectionState;
  /** The state in words where it needs them (what differs, while `mismatch`); absent or undefined otherwise. */
  stateReason?(): string | undefined;
  /**
   * Times one round trip to the shim without a step (its health check): how a wait budget that routes
   * nothing measures the link again. Rejects when the shim does not answer SERVING. Absent: not measurable.
   */
  roundTrip?(): Promise<number>;
  close(): Promise<void>;
}

/**
 * `inner` with every step passed through `step`, which calls `next` to reach the cloud; conversations, state and
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
    openConversation(options) {
      const conversation = inner.openConversation(options);
      // Steps reach `conversation` in the order they were sent, however long `step` holds each: a conditional
      // step must not overtake the step it assumes. A step `step` never forwards lets the next one through.
      let turn: Promise<void> = Promise.resolve();
      return {
        next: (request) => {
          const previousTurn = turn;
          let done!: () => void;
          turn = new Promise<void>((resolve) => (done = resolve));
          const reply = step(request, async (r) => {
            await previousTurn;
            done();
            return conversation.next(r);
          });
          reply.then(done, done);
          return reply;
        },
        // Not a step: an open sent ahead goes to `conversation` as it is.
        ...(conversation.prefill ? { prefill: (request: CloudStepRequest) => conversation.prefill!(request) } : {}),
        ...(conversation.extend ? { extend: (request: CloudStepRequest) => conversation.extend!(request) } : {}),
        close: () => conversation.close(),
      };
    },
    state: () => inner.state(),
    stateReason: () => inner.stateReason?.(),
    // Not a step: a wait budget's round-trip probe goes to `inner` as it is.
    ...(inner.roundTrip ? { roundTrip: () => inner.roundTrip!() } : {}),
    close: () => inner.close(),
  };
}
