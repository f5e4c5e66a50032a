/**
 * Conversions between the contract's vocabulary (contract-vocabulary.ts) (`TokenSource`, finish reasons) and the cloud proto's enums,
 * and of a tokenizer's fingerprint (tokenizer-fingerprint.ts) to and from its message, shared by the shim and the edge's gRPC client.
 */
import type { SpanFinish, TokenSource } from '../contract/contract-vocabulary.ts';
import { AppError } from '../errors.ts';
import { TOKENIZER_PARTS, type TokenizerFingerprint, type TokenizerPart } from '../text/tokenizer-fingerprint.ts';
import type { WireFinishReason__Output, WireTokenizerFingerprint, WireTokenizerFingerprint__Output, WireTokenSource__Output } from './proto.ts';

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

export function toWireFingerprint(fingerprint: TokenizerFingerprint): WireTokenizerFingerprint {
  const { sha256, vocabularySize, parts } = fingerprint;
  return { sha256, vocabularySize, parts: TOKENIZER_PARTS.map((name) => ({ name, sha256: parts[name] })) };
}

/** The shim's fingerprint; undefined when it sent none (no tokenizer, or a shim older than the field). Unknown parts are left out. */
export function fromWireFingerprint(wire: WireTokenizerFingerprint__Output | null | undefined): TokenizerFingerprint | undefined {
  if (!wire || wire.sha256 === '') return undefined;
  const parts = Object.fromEntries(TOKENIZER_PARTS.map((p) => [p, ''])) as Record<TokenizerPart, string>;
  for (const { name, sha256 } of wire.parts) if ((TOKENIZER_PARTS as readonly string[]).includes(name)) parts[name as TokenizerPart] = sha256;
  return { sha256: wire.sha256, vocabularySize: wire.vocabularySize, parts };
}
