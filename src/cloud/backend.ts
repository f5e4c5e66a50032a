/**
 * What every cloud model backend offers the shim: sessions whose `step` takes the whole context (the backend
 * decides what it can reuse: the embedded model its KV cache, SGLang its radix cache) and returns the
 * next span of tokens with their log-probabilities.
 */
import type { SpanFinish, TokenAlternative } from '../shared/contract-vocabulary.ts';

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

export interface BackendSequence {
  step(request: BackendStepRequest): Promise<BackendStepResult>;
  /** Frees what the session holds (a KV cache); safe to call twice. */
  dispose(): void;
}

export interface BackendInfo {
  /** Kind and model, e.g. `embedded:stories260k`. */
  name: string;
  /** Ids at or above it are rejected before reaching the backend; undefined when unknown. */
  vocabSize: number | undefined;
  maxContext: number | undefined;
}

export interface Backend {
  readonly info: BackendInfo;
  openSequence(sessionId: string): BackendSequence;
  /** Releases the model or waits for pending best-effort requests. */
  close(): Promise<void>;
}
