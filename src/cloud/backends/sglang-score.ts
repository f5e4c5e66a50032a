/**
 * A Score call as SGLang's native `POST /generate` takes it, and its reply read back. The request asks for
 * no new tokens and every prompt position's log-probabilities (`logprob_start_len: 0`): `meta_info` then
 * holds, per input position j, `input_token_logprobs[j]` = `[log p(ids[j] | ids[<j]), ids[j], text]`,
 * `input_top_logprobs[j]` (the top-k of the distribution that predicts ids[j]) and, for the ids named in
 * `token_ids_logprob`, `input_token_ids_logprobs[j]`; entry 0 of each is null (nothing predicts the first
 * id). Our position i (predicting ids[i+1]) is their entry i + 1.
 *
 * Builds without `token_ids_logprob` (older ones) ignore the field and return no `input_token_ids_logprobs`:
 * a candidate is then read from the top-k, or bounded by it (remote-scores.ts).
 *
 * @example
 * const { body, asked } = sglangScoreBody(request);
 * const reply = await http.json(await http.post('/generate', body, signal), signal);
 * const { positions, exact } = sglangScores(reply, request, asked);
 */
import { AppError } from '../../shared/errors.ts';
import { isRecord } from '../../shared/is-record.ts';
import type { TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import type { PositionScores } from '../../shared/model/position-scores.ts';
import type { BackendScoreRequest } from './backend.ts';
import { alternativesToAsk, assembleScores, type ReportedPosition } from './remote-scores.ts';
import { QuotingError } from '../quoting-error.ts';

export function sglangScoreBody(request: BackendScoreRequest): { body: Record<string, unknown>; asked: number } {
  // At least one alternative where candidates are asked for, even of a build that honours
  // token_ids_logprob: which build answers is only known from the reply, and an older one needs the
  // top-k to bound a candidate it cannot name.
  const asked = alternativesToAsk(request);
  const body: Record<string, unknown> = {
    input_ids: request.ids,
    sampling_params: { max_new_tokens: 0, temperature: 0 },
    return_logprob: true,
    logprob_start_len: 0,
    top_logprobs_num: asked,
    ...(request.candidates ? { token_ids_logprob: [...new Set(request.candidates)] } : {}),
    rid: request.requestId,
    stream: false,
  };
  return { body, asked };
}

export function sglangScores(reply: unknown, request: BackendScoreRequest, asked: number): { positions: PositionScores[]; exact: boolean } {
  if (!isRecord(reply))
    throw new QuotingError(
      'INTERNAL',
      `sglang: expected one reply object, got ${JSON.stringify(reply).slice(0, 100)}`,
      `sglang: expected one reply object, got ${reply === null ? 'null' : Array.isArray(reply) ? 'a list' : typeof reply}`,
    );
  const meta = isRecord(reply.meta_info) ? reply.meta_info : {};
  throwIfAborted(meta.finish_reason);
  const { ids, candidates } = request;
  const tokens = meta.input_token_logprobs;
  if (!Array.isArray(tokens)) {
    throw new AppError(
      'UNIMPLEMENTED',
      'sglang: the SGLang server returned no prompt log-probabilities (no meta_info.input_token_logprobs for return_logprob with logprob_start_len 0): ' +
        'a build or gateway that drops them cannot score sequences',
    );
  }
  if (tokens.length !== ids.length) {
    const counts = `${tokens.length} of ${ids.length} input tokens`;
    throw new AppError('UNIMPLEMENTED', `sglang: the SGLang server returned prompt log-probabilities for ${counts} (logprob_start_len 0 not honoured)`);
  }
  const top = perPosition(meta.input_top_logprobs, ids.length, 'input_top_logprobs', asked > 0);
  const byId = candidates ? perPosition(meta.input_token_ids_logprobs, ids.length, 'input_token_ids_logprobs', false) : undefined;
  const reported: ReportedPosition[] = [];
  for (let j = 1; j < ids.length; j++) {
    const next = triple(tokens[j]);
    if (next.id !== ids[j]) {
      throw new QuotingError(
        'INTERNAL',
        `sglang: input_token_logprobs[${j}] is for id ${next.id}, the input has ${ids[j]} there`,
        `sglang: input_token_logprobs[${j}] is for another id than the input's`,
      );
    }
    const asAsked = byId?.[j]?.find((a) => a.id === candidates![j - 1]);
    reported.push({ nextLogprob: next.logprob, alternatives: top?.[j] ?? [], ...(asAsked ? { candidateLogprob: asAsked.logprob } : {}) });
  }
  return assembleScores(reported, request, asked);
}

/** An abort finish reason → the step's error: a context too long for the model is OUT_OF_RANGE. */
export function throwIfAborted(finishReason: unknown): void {
  if (!isRecord(finishReason) || finishReason.type !== 'abort') return;
  const message = typeof finishReason.message === 'string' ? finishReason.message : 'request aborted by the server';
  throw new QuotingError(
    /longer than|context length/i.test(message) ? 'OUT_OF_RANGE' : 'UNAVAILABLE',
    `sglang: ${message}`,
    `sglang: the server aborted the request (a message of ${message.length} characters)`,
  );
}

/** `[logprob, token_id, text|null]` → `{ id, logprob }`; a null log-probability past entry 0 is orjson's -inf. */
export function triple(entry: unknown): TokenAlternative {
  if (!Array.isArray(entry) || !Number.isInteger(entry[1])) {
    throw new QuotingError('INTERNAL', `sglang: malformed logprob entry ${JSON.stringify(entry)}`, 'sglang: malformed logprob entry');
  }
  return { id: entry[1] as number, logprob: typeof entry[0] === 'number' ? entry[0] : -Infinity };
}

/** A per-input-position list of triple lists; undefined when absent and not `required`. */
function perPosition(value: unknown, length: number, field: string, required: boolean): (TokenAlternative[] | undefined)[] | undefined {
  if (value === undefined || value === null) {
    if (required) throw new AppError('INTERNAL', `sglang: the reply has no meta_info.${field} although top_logprobs_num was sent`);
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== length) {
    throw new AppError('INTERNAL', `sglang: meta_info.${field} has ${Array.isArray(value) ? value.length : 'no'} entries for ${length} input tokens`);
  }
  return value.map((entry) => (Array.isArray(entry) ? entry.map(triple) : undefined));
}
