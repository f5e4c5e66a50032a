/**
 * What every cloud model backend offers the shim: sessions whose `step` takes the whole context (the backend
 * decides what it can reuse: the embedded model its KV cache, SGLang its radix cache) and returns the
 * next span of tokens with their log-probabilities.
 */
import type { SpanFinish, TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import type { PositionScores, ScoreTurn } from '../../shared/model/position-scores.ts';

export interface SamplingSettings {
  /** 0 = greedy. */
  temperature: number;
  /** In (0, 1]. */
  topP: number;
  seed: number | undefined;
  stopTokenIds: readonly number[];
  /** Alternatives per generated token (0 = none). */
  topLogprobs: number;
}

export interface BackendStepRequest {
  /** Every token of the session's context, oldest first. */
  context: readonly number[];
  /** Most tokens to return (≥ 1). */
  maxTokens: number;
  sampling: Readonly<SamplingSettings>;
  /** Unique per step: the backend's request id (SGLang `rid`). */
  requestId: string;
  /**
   * The same for every step of a generation (and every turn of a named conversation): a backend of several
   * workers keeps the requests that share it on one worker, where their prefix is in cache. Absent: no key.
   */
  routingKey?: string;
  /** Aborts on cancellation and at the step's deadline; its reason is an AppError. */
  signal: AbortSignal;
}

export interface BackendStepResult {
  ids: number[];
  /** Natural-log probability of each id under the model. */
  logprobs: number[];
  /** Per id, the top alternatives (empty lists when not asked or not available). */
  top: TokenAlternative[][];
  /** Context tokens the backend served from its cache. */
  cachedTokens: number;
  /** Time spent in the backend (compute, or the HTTP round trip for remote backends), ms. */
  backendMs: number;
  finish: SpanFinish;
  /** The span's text when the backend returns it; the shim decodes the ids otherwise. */
  text?: string;
}

/** A prefill ahead of the session's first step: the context to compute into the backend's cache, nothing generated. */
export type BackendPrefillRequest = Omit<BackendStepRequest, 'maxTokens' | 'sampling'>;

export interface BackendPrefillResult {
  /** Context tokens found in the cache, and tokens computed now. */
  cachedTokens: number;
  prefilledTokens: number;
  backendMs: number;
}

export interface BackendSequence {
  step(request: BackendStepRequest): Promise<BackendStepResult>;
  /**
   * Computes the context into the backend's cache so that the first step reuses it (proto `open.prefill`).
   * Absent where the backend keeps nothing between requests (an OpenAI-compatible server): nothing to do.
   */
  prefill?(request: BackendPrefillRequest): Promise<BackendPrefillResult>;
  /** Frees what the session holds (a KV cache); safe to call twice. */
  dispose(): void;
}

export interface BackendInfo {
  /** Kind and model, e.g. `embedded:stories260k`. */
  name: string;
  /** Ids at or above it are rejected before reaching the backend; undefined when unknown. */
  vocabSize: number | undefined;
  maxContext: number | undefined;
  /**
   * The longest sequence one Score call may hold, when shorter than maxContext: SGLang and vLLM refuse a
   * prompt as long as the context (they keep room for one generated token, even asked for none).
   */
  maxScoreTokens?: number;
}

/** Teacher forcing: the model reads `ids` once (score-sequence.ts checks the request before a backend sees it). */
export interface BackendScoreRequest {
  ids: readonly number[];
  /** Per position i < ids.length - 1, an id whose log-probability to return; undefined = none. */
  candidates: readonly number[] | undefined;
  /** Alternatives per position, most likely first (0 = none). */
  topK: number;
  /** Ids at or above it are out of top-k and the normalisation, where the backend can do that; undefined = all. */
  vocabLimit: number | undefined;
  requestId: string;
  signal: AbortSignal;
  /**
   * Leave to run one piece of the call, from the shim's step admission (routed steps go first): the
   * embedded backend takes one per forward pass of a chunk, an HTTP backend one for its whole request.
   */
  turn: ScoreTurn;
}

export interface BackendScoreResult {
  /** One per position 0 .. ids.length - 2 (reading ids[0..i], predicting ids[i+1]). */
  positions: PositionScores[];
  /** False where a candidate's figure is a bound (only top-k came back); see the proto's ScoreResponse. */
  exact: boolean;
  backendMs: number;
}

export interface Backend {
  readonly info: BackendInfo;
  openSequence(sessionId: string): BackendSequence;
  /**
   * Prompt log-probabilities over a sequence, for the tools' teacher forcing. Absent where the backend has
   * no way to get them; it throws UNIMPLEMENTED with the reason where the server it calls refuses them.
   */
  score?(request: BackendScoreRequest): Promise<BackendScoreResult>;
  /** Releases the model or waits for pending best-effort requests. */
  close(): Promise<void>;
}
