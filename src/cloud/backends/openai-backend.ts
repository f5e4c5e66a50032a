/**
 * OpenAI-compatible `POST /v1/completions` (SGLang, vLLM, llama.cpp server) with the context as a token-id
 * prompt. Ids come from `choices[0].token_ids` (asked for with `return_token_ids: true`), or from
 * `"token_id:<id>"` token strings (vLLM's `return_tokens_as_token_ids`). A server that answers with text
 * only is an error, unless `openaiRetokenize` is configured: then the text is re-encoded with the pack's
 * tokenizer, which is lossy (the ids may differ from what the model produced). Score calls read the
 * prompt's log-probabilities off one completion with no new tokens (openai-score.ts).
 */
import { roomForOneToken } from './remote-scores.ts';
import { AppError } from '../../shared/errors.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { SpanFinish, TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import type { Backend, BackendInfo, BackendScoreRequest, BackendScoreResult, BackendSequence, BackendStepRequest, BackendStepResult } from './backend.ts';
import { isRecord } from '../../shared/is-record.ts';
import { HttpBackendClient } from './http-backend-client.ts';
import { openAiScoreBody, openAiScores, TextKeyIds } from './openai-score.ts';
import { QuotingError } from '../quoting-error.ts';

export interface OpenAiBackendOptions {
  baseUrl: string;
  apiKey: string | undefined;
  model: string;
  retries: number;
  stream: boolean;
  vocabSize: number | undefined;
  maxContext: number | undefined;
  /** Set only when re-tokenizing text-only replies is allowed. */
  retokenizer: TextTokenizer | undefined;
}

const TOKEN_ID_PREFIX = 'token_id:';

export class OpenAiBackend implements Backend {
  readonly info: BackendInfo;
  private readonly http: HttpBackendClient;
  /** Alternatives a server names by text, mapped back to ids only where that is unambiguous. */
  private readonly textKeyIds: TextKeyIds;

  constructor(readonly options: OpenAiBackendOptions) {
    this.http = new HttpBackendClient({ name: 'openai', baseUrl: options.baseUrl, apiKey: options.apiKey, retries: options.retries });
    this.info = {
      name: `openai:${options.model}@${options.baseUrl}`,
      vocabSize: options.vocabSize,
      maxContext: options.maxContext,
      ...roomForOneToken(options.maxContext),
    };
    this.textKeyIds = new TextKeyIds(options.retokenizer);
  }

  /** One completion per call, never streamed (vLLM refuses prompt_logprobs in a stream), in one turn. */
  async score(request: BackendScoreRequest): Promise<BackendScoreResult> {
    const { body, asked } = openAiScoreBody(request, this.options.model);
    const release = await request.turn();
    try {
      const start = performance.now();
      const reply = await this.http.json(await this.http.post('/v1/completions', body, request.signal), request.signal);
      return { ...openAiScores(reply, request, asked, this.textKeyIds), backendMs: performance.now() - start };
    } finally {
      release();
    }
  }

  openSequence(): BackendSequence {
    return { step: (request) => this.step(request), dispose: () => {} };
  }

  async close(): Promise<void> {}

  private async step(request: BackendStepRequest): Promise<BackendStepResult> {
    const { sampling, signal } = request;
    const body: Record<string, unknown> = {
      model: this.options.model,
      // The session's own array, not a copy: HttpBackendClient.post serializes the body before its first await.
      prompt: request.context,
      max_tokens: request.maxTokens,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      // At least 1, so the sampled token's own log-probability comes back.
      logprobs: Math.max(1, sampling.topLogprobs),
      return_token_ids: true,
      ...(sampling.stopTokenIds.length ? { stop_token_ids: [...sampling.stopTokenIds] } : {}),
      ...(sampling.seed !== undefined && sampling.temperature > 0 ? { seed: sampling.seed } : {}),
      ...(this.options.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    };
    const start = performance.now();
    // The routing key as a header only: it costs nothing, and sgl-model-gateway fronts OpenAI routes too.
    const response = await this.http.post('/v1/completions', body, signal, request.routingKey);
    const output = new CompletionOutput();
    if (this.options.stream) {
      for await (const chunk of this.http.events(response, signal)) output.add(chunk);
    } else {
      const reply = await this.http.json(response, signal);
      if (!isRecord(reply)) throw new AppError('INTERNAL', 'openai: the reply is not a JSON object');
      output.add(reply);
    }
    return output.result(request, performance.now() - start, this.options.retokenizer);
  }
}

class CompletionOutput {
  private text = '';
  private tokenIds: number[] | undefined;
  private tokens: string[] = [];
  private tokenLogprobs: (number | null)[] = [];
  private topLogprobs: (Record<string, number> | null)[] = [];
  private finishReason: string | null = null;
  private cachedTokens = 0;

  /** One reply, or one streamed chunk (whose fields are deltas). */
  add(reply: Record<string, unknown>): void {
    const usage = reply.usage;
    if (isRecord(usage) && isRecord(usage.prompt_tokens_details) && typeof usage.prompt_tokens_details.cached_tokens === 'number') {
      this.cachedTokens = usage.prompt_tokens_details.cached_tokens;
    }
    if (!Array.isArray(reply.choices)) throw new AppError('INTERNAL', 'openai: reply without choices');
    const choice = reply.choices.find((c) => isRecord(c) && (c.index ?? 0) === 0);
    if (!isRecord(choice)) return; // the usage chunk of a stream has no choices
    if (typeof choice.text === 'string') this.text += choice.text;
    if (Array.isArray(choice.token_ids)) {
      if (!choice.token_ids.every((id) => Number.isInteger(id))) throw new AppError('INTERNAL', 'openai: token_ids are not integers');
      this.tokenIds = [...(this.tokenIds ?? []), ...(choice.token_ids as number[])];
    }
    const logprobs = choice.logprobs;
    if (isRecord(logprobs)) {
      if (Array.isArray(logprobs.tokens)) this.tokens.push(...logprobs.tokens.map(String));
      if (Array.isArray(logprobs.token_logprobs)) this.tokenLogprobs.push(...(logprobs.token_logprobs as (number | null)[]));
      if (Array.isArray(logprobs.top_logprobs)) this.topLogprobs.push(...(logprobs.top_logprobs as (Record<string, number> | null)[]));
    }
    if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason;
  }

  result(request: BackendStepRequest, backendMs: number, retokenizer: TextTokenizer | undefined): BackendStepResult {
    const asIds = this.tokens.length > 0 && this.tokens.every((t) => t.startsWith(TOKEN_ID_PREFIX)) ? this.tokens.map(tokenIdString) : undefined;
    let ids = this.tokenIds ?? asIds;
    let exact = true;
    if (ids === undefined) {
      if (!retokenizer) {
        throw new AppError(
          'FAILED_PRECONDITION',
          'openai: the server returned text without token ids (no `token_ids`; it ignores `return_token_ids`): ' +
            'use a server that supports return_token_ids (vLLM ≥ 0.10.2, recent SGLang), the sglang backend, or --openai-retokenize (lossy)',
        );
      }
      ids = retokenize(retokenizer, request.context, this.text);
      exact = false;
    }
    ids = ids.slice(0, request.maxTokens);
    if (ids.length === 0) throw new AppError('INTERNAL', 'openai: the reply holds no generated tokens');
    const aligned = exact && this.tokenLogprobs.length >= ids.length;
    const logprobs = ids.map((_, i) => (aligned && typeof this.tokenLogprobs[i] === 'number' ? (this.tokenLogprobs[i] as number) : Number.NaN));
    const top = ids.map((_, i) =>
      aligned && request.sampling.topLogprobs > 0 ? alternatives(this.topLogprobs[i], request.sampling.topLogprobs, retokenizer) : [],
    );
    const finish: SpanFinish = this.finishReason === 'stop' ? 'stop' : 'length';
    return { ids, logprobs, top, cachedTokens: this.cachedTokens, backendMs, finish, text: this.text };
  }
}

/**
 * The text's ids as a continuation of the context: the context's tail is encoded with and without the
 * text, and the difference kept, so word-initial spaces come out as they do inside a sentence.
 */
function retokenize(tokenizer: TextTokenizer, context: readonly number[], text: string): number[] {
  const plain = { addBos: false, parseSpecialTokens: false };
  const prefix = tokenizer.decode(context.slice(-8));
  const before = tokenizer.encode(prefix, plain);
  const after = tokenizer.encode(prefix + text, plain);
  const aligned = before.every((id, i) => after[i] === id);
  return aligned ? after.slice(before.length) : tokenizer.encode(text, plain);
}

function tokenIdString(token: string): number {
  const id = Number(token.slice(TOKEN_ID_PREFIX.length));
  if (!Number.isInteger(id)) throw new QuotingError('INTERNAL', `openai: malformed token ${JSON.stringify(token)}`, 'openai: malformed token');
  return id;
}

/**
 * `{token text: logprob}` → the best `k` alternatives with ids. Keys are ids only as `token_id:<id>`;
 * plain text keys are mapped with the re-tokenizer when one is configured (kept when they are exactly
 * one token) and dropped otherwise: guessing an id from text is what this backend refuses to do.
 * vLLM may list k+1 entries (the sampled token too): the sort and cut handle that.
 */
function alternatives(entry: Record<string, number> | null | undefined, k: number, retokenizer: TextTokenizer | undefined): TokenAlternative[] {
  if (!isRecord(entry)) return [];
  const out: TokenAlternative[] = [];
  for (const [token, logprob] of Object.entries(entry)) {
    let id: number | undefined;
    if (token.startsWith(TOKEN_ID_PREFIX)) id = tokenIdString(token);
    else if (retokenizer) {
      const ids = retokenizer.encode(token, { addBos: false, parseSpecialTokens: false });
      if (ids.length === 1) id = ids[0];
    }
    if (id !== undefined && typeof logprob === 'number') out.push({ id, logprob });
  }
  return out.sort((a, b) => b.logprob - a.logprob).slice(0, k);
}
