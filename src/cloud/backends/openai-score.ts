/**
 * A Score call as an OpenAI-compatible `POST /v1/completions` takes it, and its reply read back. One request
 * asks for the prompt's log-probabilities both ways a server may give them, and the reply says which it
 * honoured:
 * - vLLM's extension `prompt_logprobs: k`: `choices[0].prompt_logprobs` is null for the first id, then per
 *   input position j a dict `{"<id>": {logprob, rank, decoded_token}}` of the top-k and ids[j] itself;
 * - the legacy `echo: true` with `logprobs: k` and no new tokens (SGLang, vLLM): `choices[0].logprobs`
 *   starts with the prompt, `token_logprobs[0]` null, `top_logprobs[j]` keyed by token text, or by
 *   `"token_id:<id>"` where `return_tokens_as_token_ids` is honoured (vLLM).
 * Our position i (predicting ids[i+1]) is their entry i + 1. Neither gives a candidate outside the top-k:
 * remote-scores.ts bounds it.
 *
 * @example
 * const { body, asked } = openAiScoreBody(request, 'qwen');
 * const { positions, exact } = openAiScores(reply, request, asked, textIds);
 */
import { AppError } from '../../shared/errors.ts';
import { isRecord } from '../../shared/is-record.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import type { PositionScores } from '../../shared/model/position-scores.ts';
import type { BackendScoreRequest } from './backend.ts';
import { alternativesToAsk, assembleScores, type ReportedPosition } from './remote-scores.ts';
import { QuotingError } from '../quoting-error.ts';

const TOKEN_ID_PREFIX = 'token_id:';

export function openAiScoreBody(request: BackendScoreRequest, model: string): { body: Record<string, unknown>; asked: number } {
  const asked = alternativesToAsk(request);
  const body: Record<string, unknown> = {
    model,
    prompt: request.ids,
    // No new tokens: vLLM takes 0 with echo (and only then), SGLang always.
    max_tokens: 0,
    temperature: 0,
    prompt_logprobs: asked,
    // Both ways in one request, so a call costs one round trip whichever the server knows; vLLM answers
    // both from the same figures, so its reply carries them twice.
    echo: true,
    // SGLang leaves out the prompt's log-probabilities for `logprobs: 0`.
    logprobs: Math.max(1, asked),
    return_tokens_as_token_ids: true,
  };
  return { body, asked };
}

/**
 * Text → the one id whose text it is, from the shim's tokenizer: a key that several ids decode to (or none)
 * stays unnamed, and remote-scores.ts treats it as an alternative it cannot name.
 */
export class TextKeyIds {
  private byText: Map<string, number | null> | undefined;

  constructor(private readonly tokenizer: TextTokenizer | undefined) {}

  idOf(text: string): number | undefined {
    if (!this.tokenizer) return undefined;
    this.byText ??= textIndex(this.tokenizer);
    return this.byText.get(text) ?? undefined;
  }

  get why(): string {
    const fix = 'ask a server that honours return_tokens_as_token_ids or prompt_logprobs (vLLM), or use the sglang backend';
    return this.tokenizer
      ? `and the shim cannot tell which id some of them are (several ids share the text): ${fix}`
      : `which the shim does not map back to ids without --openai-retokenize: ${fix}`;
  }
}

function textIndex(tokenizer: TextTokenizer): Map<string, number | null> {
  const index = new Map<string, number | null>();
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    if (tokenizer.idToToken(id) === undefined) continue;
    const text = tokenizer.decode([id], { skipSpecialTokens: false });
    index.set(text, index.has(text) ? null : id);
  }
  return index;
}

export function openAiScores(
  reply: unknown,
  request: BackendScoreRequest,
  asked: number,
  textIds: TextKeyIds,
): { positions: PositionScores[]; exact: boolean } {
  if (!isRecord(reply) || !Array.isArray(reply.choices)) throw new AppError('INTERNAL', 'openai: the reply is not a completion (no choices)');
  const choice = reply.choices.find((c) => isRecord(c) && (c.index ?? 0) === 0);
  if (!isRecord(choice)) throw new AppError('INTERNAL', 'openai: the reply has no choice 0');
  const { ids } = request;
  if (Array.isArray(choice.prompt_logprobs)) return assembleScores(fromPromptLogprobs(choice.prompt_logprobs, ids), request, asked);
  const echoed = isRecord(choice.logprobs) ? choice.logprobs : undefined;
  // Echoed prompt entries start with null: a server that ignored `echo` lists only generated tokens, all numbers.
  if (echoed && Array.isArray(echoed.token_logprobs) && echoed.token_logprobs.length >= ids.length && echoed.token_logprobs[0] === null) {
    return assembleScores(fromEcho(echoed, ids, textIds), request, asked, textIds.why);
  }
  throw new AppError(
    'UNIMPLEMENTED',
    "openai: the server returned no prompt log-probabilities: neither choices[0].prompt_logprobs (vLLM's `prompt_logprobs`) nor an echoed prompt " +
      '(`echo: true` with `logprobs` and max_tokens 0) came back; use a vLLM or SGLang server, or the sglang backend',
  );
}

function fromPromptLogprobs(entries: unknown[], ids: readonly number[]): ReportedPosition[] {
  if (entries.length < ids.length) throw new AppError('INTERNAL', `openai: prompt_logprobs has ${entries.length} entries for ${ids.length} prompt tokens`);
  const reported: ReportedPosition[] = [];
  for (let j = 1; j < ids.length; j++) {
    const entry = entries[j];
    if (!isRecord(entry)) throw new AppError('INTERNAL', `openai: prompt_logprobs[${j}] is not an object`);
    const alternatives: TokenAlternative[] = Object.entries(entry).map(([key, value]) => ({ id: Number(key), logprob: logprobOf(value) }));
    const next = alternatives.find((a) => a.id === ids[j]);
    if (!next || alternatives.some((a) => !Number.isInteger(a.id))) {
      const what = next ? 'has keys that are not token ids' : "lacks the prompt's own id";
      throw new QuotingError('INTERNAL', `openai: prompt_logprobs[${j}] ${what}${next ? '' : ` ${ids[j]}`}`, `openai: prompt_logprobs[${j}] ${what}`);
    }
    reported.push({ nextLogprob: next.logprob, alternatives });
  }
  return reported;
}

function fromEcho(logprobs: Record<string, unknown>, ids: readonly number[], textIds: TextKeyIds): ReportedPosition[] {
  const tokens = Array.isArray(logprobs.tokens) ? logprobs.tokens : [];
  const tokenLogprobs = logprobs.token_logprobs as unknown[];
  const top = Array.isArray(logprobs.top_logprobs) ? logprobs.top_logprobs : [];
  const reported: ReportedPosition[] = [];
  for (let j = 1; j < ids.length; j++) {
    const token = tokens[j];
    if (typeof token === 'string' && token.startsWith(TOKEN_ID_PREFIX) && tokenIdOf(token) !== ids[j]) {
      throw new QuotingError(
        'INTERNAL',
        `openai: the echoed prompt has ${token} at ${j}, the prompt has id ${ids[j]}`,
        `openai: the echoed prompt has another token than the prompt's at ${j}`,
      );
    }
    const alternatives: TokenAlternative[] = [];
    const unnamed: number[] = [];
    for (const [key, value] of Object.entries(isRecord(top[j]) ? top[j] : {})) {
      // The prompt's own token, by its text and figure, is ids[j] whatever other ids share its text.
      const own = key === token && logprobOf(value) === logprobOf(tokenLogprobs[j]);
      const id = key.startsWith(TOKEN_ID_PREFIX) ? tokenIdOf(key) : own ? ids[j] : textIds.idOf(key);
      if (id === undefined) unnamed.push(logprobOf(value));
      else alternatives.push({ id, logprob: logprobOf(value) });
    }
    reported.push({ nextLogprob: logprobOf(tokenLogprobs[j]), alternatives, unnamed });
  }
  return reported;
}

/** A number, or vLLM's `{logprob, rank, decoded_token}`; null is a log-probability JSON cannot write (-inf). */
function logprobOf(value: unknown): number {
  const logprob = isRecord(value) ? value.logprob : value;
  if (logprob === null) return -Infinity;
  if (typeof logprob !== 'number')
    throw new QuotingError('INTERNAL', `openai: malformed log-probability ${JSON.stringify(value)}`, 'openai: malformed log-probability');
  return logprob;
}

function tokenIdOf(token: string): number {
  const id = Number(token.slice(TOKEN_ID_PREFIX.length));
  if (!Number.isInteger(id)) throw new QuotingError('INTERNAL', `openai: malformed token ${JSON.stringify(token)}`, 'openai: malformed token');
  return id;
}
