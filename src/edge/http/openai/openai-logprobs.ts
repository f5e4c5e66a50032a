/**
 * The tokens' log-probabilities (loop/token-logprobs.ts) in OpenAI's two shapes: chat's `logprobs.content`
 * (one entry per token with its text, UTF-8 bytes and `top_logprobs`) and completions' parallel lists
 * (`tokens`, `token_logprobs`, `top_logprobs` as text → log-probability, `text_offset`). A token's text is
 * its bytes read as UTF-8; a token that holds part of a character only is written as vLLM writes it,
 * `bytes:` and the bytes escaped (`bytes:\xe6\x97`). A token no model chose (a private value put back in
 * place of the cloud's placeholder) has log-probability null.
 *
 * @example
 * const names = new TokenNames(tokenizer);
 * chatLogprobs(events, names);             // { content: [{ token: ' Once', logprob: -0.3, bytes: [...], top_logprobs: [...] }], refusal: null }
 * completionLogprobs(events, names, 0);   // { tokens: [' Once'], token_logprobs: [-0.3], top_logprobs: [{ ' Once': -0.3 }], text_offset: [0] }
 */
import type { TokenAlternative } from '../../../shared/contract/contract-vocabulary.ts';
import { TokenBytes } from '../../../shared/text/token-bytes.ts';
import type { TextTokenizer } from '../../../shared/text/tokenizer.ts';
import type { TokenEvent } from '../../loop/decoder-loop.ts';

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A vocabulary's tokens as OpenAI names them: text and bytes (not privacy/token-names.ts, which follows a context's text). */
export class TokenNames {
  private readonly bytes: TokenBytes;

  constructor(tokenizer: TextTokenizer) {
    this.bytes = new TokenBytes(tokenizer);
  }

  of(id: number): { token: string; bytes: number[] } {
    const bytes = this.bytes.of(id);
    let token: string;
    try {
      token = STRICT_UTF8.decode(bytes);
    } catch {
      token = `bytes:${[...bytes].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('')}`;
    }
    return { token, bytes: [...bytes] };
  }
}

function alternatives(top: readonly TokenAlternative[] | undefined, names: TokenNames) {
  return (top ?? []).map((a) => ({ ...names.of(a.id), logprob: a.logprob }));
}

export function chatLogprobs(events: readonly TokenEvent[], names: TokenNames): Record<string, unknown> {
  const content = events.map((e) => {
    const { token, bytes } = names.of(e.id);
    return {
      token,
      logprob: e.logprob ?? null,
      bytes,
      top_logprobs: alternatives(e.topLogprobs, names).map(({ token, logprob, bytes }) => ({ token, logprob, bytes })),
    };
  });
  return { content, refusal: null };
}

/** `offset`: where the first event's text starts in the completion's text. */
export function completionLogprobs(events: readonly TokenEvent[], names: TokenNames, offset: number): Record<string, unknown> {
  const textOffset: number[] = [];
  let at = offset;
  for (const e of events) {
    textOffset.push(at);
    at += e.text.length;
  }
  return {
    tokens: events.map((e) => names.of(e.id).token),
    token_logprobs: events.map((e) => e.logprob ?? null),
    top_logprobs: events.map((e) => Object.fromEntries(alternatives(e.topLogprobs, names).map((a) => [a.token, a.logprob]))),
    text_offset: textOffset,
  };
}
