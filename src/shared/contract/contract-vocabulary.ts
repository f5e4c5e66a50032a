/**
 * The words of the edge ↔ cloud contract that both sides use in their own code: where a token came from,
 * a model's alternatives for a token, and why a cloud span ended. The wire spelling of each (the proto's
 * enums) is converted in `grpc/wire.ts`; the edge and the cloud import these, never each other.
 */

/** Where a token came from: the prompt, the edge model, the cloud model, or the edge alone after a cloud failure. */
export type TokenSource = 'prompt' | 'slm' | 'llm' | 'fallback';

/** One alternative for a generated token with its natural-log probability under the model. */
export interface TokenAlternative {
  id: number;
  logprob: number;
}

/** Why a cloud span ended: it is full, its last id is a stop id, or the model's context window is full. */
export type SpanFinish = 'length' | 'stop' | 'context';
