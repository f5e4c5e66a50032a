/**
 * SGLang's native `POST /generate` with token ids. Each step sends the session's whole context as
 * `input_ids`: SGLang's radix cache finds the shared prefix, so only the new tokens are computed, and
 * `meta_info.cached_tokens` says how many were reused. Accepts every reply variant of SGLANG_API.md:
 * `output_ids`, `token_ids`, or only `output_token_logprobs` (older builds); streaming with cumulative
 * or incremental chunks (told apart by `completion_tokens`); errors as HTTP bodies, as `data: {"error"}`
 * events, or as an `abort` finish reason. A cancelled or timed-out step closes the HTTP connection and
 * also sends `POST /abort_request` (best-effort). The session's routing key goes with every request, as the
 * `X-SMG-Routing-Key` header and the body's `routing_key`: behind sgl-model-gateway (`consistent_hashing`
 * or `manual` policy) all of a generation's steps then reach the worker whose radix cache holds its context.
 * Score calls read the prompt's log-probabilities off one `/generate` with no new tokens (sglang-score.ts).
 */
import { roomForOneToken } from './remote-scores.ts';
import { AppError } from '../../shared/errors.ts';
import type { SpanFinish, TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import type {
  Backend,
  BackendInfo,
  BackendPrefillRequest,
  BackendPrefillResult,
  BackendScoreRequest,
  BackendScoreResult,
  BackendSequence,
  BackendStepRequest,
  BackendStepResult,
} from './backend.ts';
import { isRecord } from '../../shared/is-record.ts';
import { HttpBackendClient } from './http-backend-client.ts';
import { sglangScoreBody, sglangScores, throwIfAborted } from './sglang-score.ts';
import { QuotingError } from '../quoting-error.ts';

export interface SglangBackendOptions {
  baseUrl: string;
  apiKey: string | undefined;
  retries: number;
  stream: boolean;
  vocabSize: number | undefined;
  maxContext: number | undefined;
}

/** Timeout of the best-effort abort request. */
const ABORT_TIMEOUT_MS = 2_000;

export class SglangBackend implements Backend {
  readonly info: BackendInfo;
  readonly http: HttpBackendClient;
  /** Best-effort abort requests still in flight; `close` waits for them. */
  private readonly pendingAborts = new Set<Promise<unknown>>();

  constructor(readonly options: SglangBackendOptions) {
    this.http = new HttpBackendClient({ name: 'sglang', baseUrl: options.baseUrl, apiKey: options.apiKey, retries: options.retries });
    this.info = { name: `sglang:${options.baseUrl}`, vocabSize: options.vocabSize, maxContext: options.maxContext, ...roomForOneToken(options.maxContext) };
  }

  openSequence(): BackendSequence {
    return { step: (request) => this.step(request), prefill: (request) => this.prefill(request), dispose: () => {} };
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.pendingAborts]);
  }

  /**
   * One `/generate` per call, never streamed, in one turn; no routing key: a scored window shares no prefix
   * worth a worker's cache.
   */
  async score(request: BackendScoreRequest): Promise<BackendScoreResult> {
    const { signal } = request;
    const { body, asked } = sglangScoreBody(request);
    const release = await request.turn();
    const start = performance.now();
    try {
      const reply = await this.http.json(await this.http.post('/generate', body, signal), signal);
      return { ...sglangScores(reply, request, asked), backendMs: performance.now() - start };
    } catch (e) {
      if (signal.aborted) this.abortRemote(request.requestId, undefined);
      throw e;
    } finally {
      release();
    }
  }

  /**
   * A `/generate` with no new tokens: SGLang computes the prompt and its radix cache keeps the prefix for the
   * session's first step, on the worker the routing key picks.
   */
  private async prefill(request: BackendPrefillRequest): Promise<BackendPrefillResult> {
    const { signal, routingKey } = request;
    const body = {
      input_ids: request.context,
      sampling_params: { max_new_tokens: 0, temperature: 0 },
      rid: request.requestId,
      ...(routingKey ? { routing_key: routingKey } : {}),
      stream: false,
    };
    const start = performance.now();
    try {
      const reply = await this.http.json(await this.http.post('/generate', body, signal, routingKey), signal);
      const meta = isRecord(reply) && isRecord(reply.meta_info) ? reply.meta_info : {};
      if (isRecord(meta.finish_reason)) throwIfAborted(meta.finish_reason);
      const cachedTokens = typeof meta.cached_tokens === 'number' ? Math.min(meta.cached_tokens, request.context.length) : 0;
      return { cachedTokens, prefilledTokens: request.context.length - cachedTokens, backendMs: performance.now() - start };
    } catch (e) {
      if (signal.aborted) this.abortRemote(request.requestId, routingKey);
      throw e;
    }
  }

  private async step(request: BackendStepRequest): Promise<BackendStepResult> {
    const { sampling, signal } = request;
    const body: Record<string, unknown> = {
      // The session's own array, not a copy: HttpBackendClient.post serializes the body before its first await.
      input_ids: request.context,
      sampling_params: {
        max_new_tokens: request.maxTokens,
        temperature: sampling.temperature,
        top_p: sampling.topP,
        ...(sampling.stopTokenIds.length ? { stop_token_ids: [...sampling.stopTokenIds] } : {}),
      },
      // Log-probabilities carry the ids in every build, also those without `output_ids`.
      return_logprob: true,
      ...(sampling.topLogprobs > 0 ? { top_logprobs_num: sampling.topLogprobs } : {}),
      rid: request.requestId,
      // The routing key in the body too: SGLang's GenerateReqInput takes it (for its routing-key scheduling
      // policy), and a gateway that reads bodies rather than headers finds it there.
      ...(request.routingKey ? { routing_key: request.routingKey } : {}),
      stream: this.options.stream,
    };
    const start = performance.now();
    try {
      const response = await this.http.post('/generate', body, signal, request.routingKey);
      const output = new SglangOutput();
      if (this.options.stream) {
        for await (const chunk of this.http.events(response, signal)) output.add(chunk);
      } else {
        const reply = await this.http.json(response, signal);
        if (!isRecord(reply))
          throw new QuotingError(
            'INTERNAL',
            `sglang: expected one reply object, got ${JSON.stringify(reply).slice(0, 100)}`,
            `sglang: expected one reply object, got ${reply === null ? 'null' : Array.isArray(reply) ? 'a list' : typeof reply}`,
          );
        output.add(reply);
      }
      return output.result(request, performance.now() - start);
    } catch (e) {
      if (signal.aborted) this.abortRemote(request.requestId, request.routingKey);
      throw e;
    }
  }

  /** With the step's routing key, so a gateway sends the abort to the worker that runs the request. */
  private abortRemote(rid: string, routingKey: string | undefined): void {
    const pending = this.http.postBestEffort('/abort_request', { rid }, ABORT_TIMEOUT_MS, routingKey);
    this.pendingAborts.add(pending);
    void pending.finally(() => this.pendingAborts.delete(pending));
  }
}

type Mode = 'unknown' | 'cumulative' | 'incremental';

/** A list that arrives either whole-so-far or as deltas. */
class ChunkedList<T> {
  items: T[] = [];
  mode: Mode = 'unknown';

  /** `total`: how many items the output has so far (meta_info.completion_tokens), when known. */
  add(chunk: T[], total: number | undefined): void {
    if (this.mode === 'unknown' && this.items.length > 0 && total !== undefined) {
      if (chunk.length === total) this.mode = 'cumulative';
      else if (this.items.length + chunk.length === total) this.mode = 'incremental';
    }
    if (this.mode === 'incremental') this.items.push(...chunk);
    else if (this.mode === 'cumulative' || this.items.length === 0 || extends_(chunk, this.items)) this.items = chunk;
    else this.items.push(...chunk);
  }
}

/** Accumulates one or more reply objects (a JSON reply, or the chunks of a stream). */
class SglangOutput {
  private readonly ids = new ChunkedList<number>();
  private readonly logprobs = new ChunkedList<number>();
  private readonly top = new ChunkedList<TokenAlternative[]>();
  private text = '';
  private textMode: Mode = 'unknown';
  private hasText = false;
  private cachedTokens = 0;
  private finishReason: Record<string, unknown> | null = null;

  add(reply: Record<string, unknown>): void {
    const meta = isRecord(reply.meta_info) ? reply.meta_info : {};
    const total = typeof meta.completion_tokens === 'number' ? meta.completion_tokens : undefined;
    const tokenLogprobs = Array.isArray(meta.output_token_logprobs) ? meta.output_token_logprobs.map(logprobEntry) : undefined;
    const ids = intArray(reply.output_ids) ?? intArray(reply.token_ids) ?? tokenLogprobs?.map((e) => e.id);
    if (ids === undefined) {
      throw new AppError('INTERNAL', 'sglang: reply has neither output_ids, token_ids nor output_token_logprobs (was return_logprob ignored?)');
    }
    this.ids.add(ids, total);
    if (tokenLogprobs)
      this.logprobs.add(
        tokenLogprobs.map((e) => e.logprob),
        total,
      );
    if (Array.isArray(meta.output_top_logprobs)) {
      this.top.add(
        meta.output_top_logprobs.map((alts) => (Array.isArray(alts) ? alts.map(logprobEntry).map(({ id, logprob }) => ({ id, logprob })) : [])),
        total,
      );
    }
    if (typeof reply.text === 'string') this.addText(reply.text);
    if (typeof meta.cached_tokens === 'number') this.cachedTokens = meta.cached_tokens;
    if (isRecord(meta.finish_reason)) {
      this.finishReason = meta.finish_reason;
      throwIfAborted(meta.finish_reason);
    }
  }

  private addText(text: string): void {
    if (!this.hasText) {
      this.hasText = true;
      this.text = text;
      return;
    }
    // Cumulative ids mean cumulative text; with delta ids some builds still sent the whole text.
    if (this.ids.mode === 'cumulative') this.textMode = 'cumulative';
    if (this.textMode === 'unknown' && this.text.length > 0) this.textMode = text.startsWith(this.text) ? 'cumulative' : 'incremental';
    this.text = this.textMode === 'cumulative' ? text : this.text + text;
  }

  result(request: BackendStepRequest, backendMs: number): BackendStepResult {
    const ids = this.ids.items.slice(0, request.maxTokens);
    if (ids.length === 0) throw new AppError('INTERNAL', 'sglang: the reply holds no generated tokens');
    const logprobs = ids.map((_, i) => this.logprobs.items[i] ?? Number.NaN);
    const top = ids.map((_, i) => (this.top.items[i] ?? []).slice(0, request.sampling.topLogprobs));
    let finish: SpanFinish = 'length';
    if (this.finishReason?.type === 'stop') {
      finish = 'stop';
      const matched = this.finishReason.matched;
      // A stop id the server matched but left out of the ids: the edge needs it to end the generation.
      if (typeof matched === 'number' && ids[ids.length - 1] !== matched && ids.length < request.maxTokens) {
        ids.push(matched);
        logprobs.push(Number.NaN);
        top.push([]);
      }
    }
    return { ids, logprobs, top, cachedTokens: this.cachedTokens, backendMs, finish, ...(this.hasText ? { text: this.text } : {}) };
  }
}

/** Without a count to go by: a longer list that starts with what we have is the whole output so far. */
function extends_<T>(chunk: T[], items: T[]): boolean {
  return chunk.length > items.length && items.every((item, i) => chunk[i] === item);
}

/** `[logprob, token_id, text|null]` → `{ id, logprob }`. */
function logprobEntry(entry: unknown): { id: number; logprob: number } {
  if (!Array.isArray(entry) || !Number.isInteger(entry[1])) {
    throw new QuotingError('INTERNAL', `sglang: malformed logprob entry ${JSON.stringify(entry)}`, 'sglang: malformed logprob entry');
  }
  return { id: entry[1] as number, logprob: typeof entry[0] === 'number' ? entry[0] : Number.NaN };
}

function intArray(value: unknown): number[] | undefined {
  if (!Array.isArray(value)) return undefined;
  if (!value.every((v) => Number.isInteger(v)))
    throw new QuotingError('INTERNAL', `sglang: token ids are not integers: ${JSON.stringify(value).slice(0, 100)}`, 'sglang: token ids are not integers');
  return value as number[];
}
