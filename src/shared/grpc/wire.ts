/**
 * Conversions between the contract's vocabulary (contract-vocabulary.ts) (`TokenSource`, finish reasons) and the cloud proto's enums,
 * shared by the shim and the edge's gRPC client.
 */
import type { SpanFinish, TokenSource } from '../contract-vocabulary.ts';
import { AppError } from '../errors.ts';
import type { WireFinishReason__Output, WireTokenSource__Output } from './proto.ts';

const TO_WIRE: Record<TokenSource, WireTokenSource__Output> = {
  prompt: 'TOKEN_SOURCE_PROMPT',
  slm: 'TOKEN_SOURCE_SLM',
  llm: 'TOKEN_SOURCE_LLM',
  fallback: 'TOKEN_SOURCE_FALLBACK',
};

const FROM_WIRE: Partial<Record<WireTokenSource__Output, TokenSource>> = {
  TOKEN_SOURCE_PROMPT: 'prompt',
  TOKEN_SOURCE_SLM: 'slm',
  TOKEN_SOURCE_LLM: 'llm',
  TOKEN_SOURCE_FALLBACK: 'fallback',
};

export function toWireSources(sources: readonly TokenSource[]): WireTokenSource__Output[] {
  return sources.map((s) => TO_WIRE[s]);
}

/** Wire sources → TokenSource; UNSPECIFIED or unknown values are an INVALID_ARGUMENT naming `field`. */
export function fromWireSources(sources: readonly WireTokenSource__Output[], field: string): TokenSource[] {
  return sources.map((s, i) => {
    const source = FROM_WIRE[s];
    if (!source) throw new AppError('INVALID_ARGUMENT', `${field}[${i}] is ${String(s)}: each token needs a source (prompt, slm, llm, fallback)`);
    return source;
  });
}

const FINISH_TO_WIRE: Record<SpanFinish, WireFinishReason__Output> = {
  length: 'FINISH_REASON_LENGTH',
  stop: 'FINISH_REASON_STOP',
  context: 'FINISH_REASON_CONTEXT',
};

export function toWireFinish(finish: SpanFinish): WireFinishReason__Output {
  return FINISH_TO_WIRE[finish];
}
