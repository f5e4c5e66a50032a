/**
 * A small HTTP server that speaks SGLang's native API as SGLANG_API.md describes it (`POST /generate`,
 * `POST /abort_request`, `GET /health`, `GET /get_model_info`) and computes its answers with the real
 * cloud model. It records each request's body and its `X-SMG-Routing-Key` header (the routing key a
 * gateway in front of several workers would hash). Options select the build variant: which field carries the ids, streaming chunks
 * cumulative or incremental, and failures (a hanging request, error bodies, a mid-stream error, an
 * abort finish reason). With `return_logprob` and `logprob_start_len` ≥ 0 it returns the prompt's
 * log-probabilities as SGLang does (`input_token_logprobs`, `input_top_logprobs`, `input_token_ids_logprobs`:
 * one entry per input position from `logprob_start_len`, null for position 0), from the model's logits.
 */
import type { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import type { TextTokenizer } from '../../src/shared/text/tokenizer.ts';
import {
  checkFields,
  disconnected,
  fakeGenerate,
  fakePromptLogprobs,
  is,
  RadixCacheSim,
  sse,
  type FakeGeneration,
  type FakePromptPosition,
} from './cloud-fake-model.ts';

export interface FakeSglangOptions {
  /** Where the ids are: `output_ids` (current), `token_ids` (some builds), `none` (before Aug 2025). */
  idsField?: 'output_ids' | 'token_ids' | 'none';
  /** `cumulative` (default), `incremental` (--incremental-streaming-output), or delta ids with cumulative text. */
  streamMode?: 'cumulative' | 'incremental' | 'delta-ids-cumulative-text';
  /** No `text` in replies (--skip-tokenizer-init). */
  noText?: boolean;
  /** Never answer /generate; wait for the client to go away. */
  hang?: boolean;
  /** Answer /generate with this HTTP error. */
  httpError?: { status: number; body: unknown };
  /** While streaming, send one chunk and then `data: {"error": ...}`. */
  streamError?: string;
  /** End the output with an abort finish reason carrying this message. */
  abortFinish?: string;
  /** A build before `token_ids_logprob`: the field is accepted and ignored (no `input_token_ids_logprobs`). */
  noTokenIdsLogprob?: boolean;
  /** No prompt log-probabilities at all: no `input_*` lists in `meta_info`, whatever was asked. */
  noPromptLogprobs?: boolean;
}

const SAMPLING_SPEC = {
  max_new_tokens: is.nonNegInt,
  temperature: (v: unknown) => is.number(v) && (v as number) >= 0,
  top_p: (v: unknown) => is.number(v) && (v as number) > 0 && (v as number) <= 1,
  top_k: is.int,
  stop: is.stop,
  stop_token_ids: is.ints,
  ignore_eos: is.bool,
  skip_special_tokens: is.bool,
};

const REQUEST_SPEC = {
  input_ids: is.ints,
  sampling_params: is.object,
  return_logprob: is.bool,
  logprob_start_len: is.int,
  top_logprobs_num: is.nonNegInt,
  token_ids_logprob: is.ints,
  return_text_in_logprobs: is.bool,
  stream: is.bool,
  rid: is.string,
  routing_key: is.string,
};

export class FakeSglang {
  readonly requests: Record<string, unknown>[] = [];
  /** The `X-SMG-Routing-Key` header of each of `requests` (null when absent). */
  readonly routingKeys: (string | null)[] = [];
  /** rids received by /abort_request. */
  readonly aborts: string[] = [];
  /** The `X-SMG-Routing-Key` header of each of `aborts`. */
  readonly abortRoutingKeys: (string | null)[] = [];
  /** Requests whose client closed the connection before the answer. */
  disconnects = 0;
  private readonly cache = new RadixCacheSim();
  private readonly server: ReturnType<typeof Bun.serve>;

  constructor(
    private readonly model: DecoderModel,
    private readonly tokenizer: TextTokenizer,
    public options: FakeSglangOptions = {},
  ) {
    this.server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (request) => this.route(request) });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  async stop(): Promise<void> {
    await this.server.stop(true);
  }

  private async route(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (request.method === 'GET' && path === '/health') return new Response('');
    if (request.method === 'GET' && path === '/get_model_info') {
      return Response.json({ model_path: this.model.pack.dir, tokenizer_path: this.model.pack.dir, is_generation: true });
    }
    if (request.method === 'POST' && path === '/abort_request') {
      const body = (await request.json()) as { rid?: unknown };
      if (typeof body.rid !== 'string') return badRequest('rid must be a string');
      this.aborts.push(body.rid);
      this.abortRoutingKeys.push(request.headers.get('x-smg-routing-key'));
      return Response.json({});
    }
    if (request.method === 'POST' && path === '/generate') return this.generate(request);
    return Response.json({ detail: 'Not Found' }, { status: 404 });
  }

  private async generate(request: Request): Promise<Response> {
    const body = (await request.json()) as Record<string, unknown>;
    this.requests.push(body);
    this.routingKeys.push(request.headers.get('x-smg-routing-key'));
    const problems = checkFields(body, REQUEST_SPEC, 'body');
    const sampling = (body.sampling_params ?? {}) as Record<string, unknown>;
    if (is.object(sampling)) problems.push(...checkFields(sampling, SAMPLING_SPEC, 'sampling_params'));
    if (problems.length) return badRequest(problems.join('; '));
    const input = body.input_ids as number[] | undefined;
    if (!input || input.length === 0) return Response.json({ error: { message: 'input_ids cannot be empty.' } }, { status: 400 });
    const { vocabSize, maxPositions } = this.model.pack;
    if (input.some((id) => id < 0 || id >= vocabSize)) {
      return Response.json({ error: { message: `Token ids must be in [0, ${vocabSize}).` } }, { status: 400 });
    }
    if (input.length >= maxPositions) {
      return Response.json(
        { error: { message: `The input (${input.length} tokens) is longer than the model's context length (${maxPositions} tokens).` } },
        { status: 400 },
      );
    }
    if (this.options.httpError) return Response.json(this.options.httpError.body, { status: this.options.httpError.status });
    if (this.options.hang) {
      await disconnected(request);
      this.disconnects++;
      return new Response(null, { status: 499 });
    }

    const rid = (body.rid as string | undefined) ?? crypto.randomUUID().replaceAll('-', '');
    const topN = (body.top_logprobs_num as number | undefined) ?? 0;
    const generation = await fakeGenerate(this.model, this.tokenizer, input, {
      maxNewTokens: (sampling.max_new_tokens as number | undefined) ?? 128,
      temperature: (sampling.temperature as number | undefined) ?? 1,
      topP: (sampling.top_p as number | undefined) ?? 1,
      stopTokenIds: (sampling.stop_token_ids as number[] | undefined) ?? [],
      ignoreEos: (sampling.ignore_eos as boolean | undefined) ?? false,
      topN,
      seed: 1234,
    });
    const cached = this.cache.cachedTokens(input);
    this.cache.remember([...input, ...generation.ids]);
    const logprobStart = (body.logprob_start_len as number | undefined) ?? -1;
    const tokenIds = this.options.noTokenIdsLogprob ? undefined : (body.token_ids_logprob as number[] | undefined);
    const prompt = body.return_logprob === true && logprobStart >= 0 ? await fakePromptLogprobs(this.model, input, topN, tokenIds) : undefined;
    const inputLogprobs = new InputLogprobs(input, prompt, logprobStart, topN, tokenIds !== undefined);
    const reply = new ReplyBuilder(generation, inputLogprobs, rid, cached, body.return_logprob === true, topN, this.options);
    if (body.stream !== true) return Response.json(reply.chunk(generation.ids.length, 0, true));

    const mode = this.options.streamMode ?? 'cumulative';
    const options = this.options;
    const chunks = async function* () {
      for (let n = 1; n <= generation.ids.length; n++) {
        const from = mode === 'cumulative' ? 0 : n - 1;
        const last = n === generation.ids.length;
        if (options.streamError && n === 2) {
          yield { error: { message: options.streamError } };
          return;
        }
        const chunk = reply.chunk(n, from, last);
        if (mode === 'delta-ids-cumulative-text') chunk.text = generation.pieces.slice(0, n).join('');
        yield chunk;
      }
    };
    return sse(chunks());
  }
}

type Triple = [number | null, number, null];

/** The `input_*` lists of meta_info: for the last input id only by default (logprob_start_len -1), as SGLang. */
class InputLogprobs {
  constructor(
    readonly input: number[],
    private readonly prompt: (FakePromptPosition | null)[] | undefined,
    private readonly start: number,
    private readonly topN: number,
    private readonly withTokenIds: boolean,
  ) {}

  fields(): Record<string, unknown> {
    if (!this.prompt) return { input_token_logprobs: [[null, this.input[this.input.length - 1], null]], input_top_logprobs: [null] };
    const positions = this.prompt.slice(this.start);
    const ids = this.input.slice(this.start);
    const triples = (list: { id: number; logprob: number }[]): Triple[] => list.map((a) => [a.logprob, a.id, null]);
    const fields: Record<string, unknown> = { input_token_logprobs: positions.map((p, i): Triple => [p ? p.logprob : null, ids[i]!, null]) };
    if (this.topN > 0) fields.input_top_logprobs = positions.map((p) => (p ? triples(p.top) : null));
    if (this.withTokenIds) fields.input_token_ids_logprobs = positions.map((p) => (p ? triples(p.requested) : null));
    return fields;
  }
}

class ReplyBuilder {
  constructor(
    private readonly g: FakeGeneration,
    private readonly inputLogprobs: InputLogprobs,
    private readonly rid: string,
    private readonly cached: number,
    private readonly logprobs: boolean,
    private readonly topN: number,
    private readonly options: FakeSglangOptions,
  ) {}

  /** The reply after `n` tokens, holding tokens [from, n). */
  chunk(n: number, from: number, last: boolean): Record<string, unknown> {
    const triple = (logprob: number, id: number) => [logprob, id, null];
    const meta: Record<string, unknown> = {
      id: this.rid,
      finish_reason: last ? this.finishReason() : null,
      prompt_tokens: this.inputLogprobs.input.length,
      completion_tokens: n,
      cached_tokens: this.cached,
      e2e_latency: 0.001,
      weight_version: 'default',
    };
    if (this.logprobs) {
      if (!this.options.noPromptLogprobs) Object.assign(meta, this.inputLogprobs.fields());
      meta.output_token_logprobs = this.g.ids.slice(from, n).map((id, i) => triple(this.g.logprobs[from + i]!, id));
      if (this.topN > 0) meta.output_top_logprobs = this.g.top.slice(from, n).map((alts) => alts.map((a) => triple(a.logprob, a.id)));
    }
    const reply: Record<string, unknown> = { meta_info: meta };
    if (!this.options.noText) reply.text = this.g.pieces.slice(from, n).join('');
    const field = this.options.idsField ?? 'output_ids';
    if (field !== 'none') reply[field] = this.g.ids.slice(from, n);
    return reply;
  }

  private finishReason(): Record<string, unknown> {
    if (this.options.abortFinish) return { type: 'abort', message: this.options.abortFinish };
    if (this.g.matched !== undefined) return { type: 'stop', matched: this.g.matched };
    return { type: 'length', length: this.g.ids.length };
  }
}

function badRequest(message: string): Response {
  return Response.json({ object: 'error', message, type: 'Bad Request', param: null, code: 400 }, { status: 400 });
}
