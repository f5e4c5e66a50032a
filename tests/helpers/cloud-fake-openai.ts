/**
 * A small OpenAI-compatible completions server (`POST /v1/completions`) in the shapes SGLang and vLLM
 * produce, answering with the real cloud model. Options choose whether `return_token_ids` is honoured
 * (older servers ignore it and return text only), vLLM's `token_id:<id>` token strings, vLLM's N+1
 * top entries, and the error body style. The prompt's log-probabilities come as vLLM's
 * `prompt_logprobs` (`choices[0].prompt_logprobs`: null, then per position `{"<id>": {logprob, rank,
 * decoded_token}}` of the top N and the prompt's own id) and as an echoed prompt (`echo` with `logprobs`,
 * non-streaming), each of which an option turns off, as servers without them ignore the field.
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

export interface FakeOpenAiOptions {
  /** Honour `return_token_ids` (recent vLLM / SGLang). Default true. */
  tokenIds?: boolean;
  /** Write tokens as `token_id:<id>` (vLLM `--return-tokens-as-token-ids`; per request: `return_tokens_as_token_ids`). */
  tokenIdStrings?: boolean;
  /** vLLM style: top_logprobs holds the sampled token too (N+1 entries). */
  extraTopEntry?: boolean;
  /** Error body style. */
  errors?: 'sglang' | 'vllm';
  /** Answer every completion with this error message (HTTP 400). */
  fail?: string;
  /** Never answer a completion: wait until the client closes the connection (counted in `disconnects`). */
  hang?: boolean;
  /** When streaming, send this error as `data: {"error": ...}` after the first chunk, then `[DONE]`. */
  streamError?: string;
  /** Ignore vLLM's `prompt_logprobs` (SGLang's OpenAI API, llama.cpp). */
  noPromptLogprobs?: boolean;
  /** Ignore `echo` (servers that never echo the prompt). */
  noEcho?: boolean;
  /** Ignore the per-request `return_tokens_as_token_ids` (SGLang's OpenAI API): tokens come as text. */
  noTokenIdsAsTokens?: boolean;
}

const REQUEST_SPEC = {
  model: is.string,
  prompt: (v: unknown) => is.ints(v) || is.string(v),
  max_tokens: is.nonNegInt,
  temperature: (v: unknown) => is.number(v) && (v as number) >= 0,
  top_p: (v: unknown) => is.number(v) && (v as number) > 0 && (v as number) <= 1,
  logprobs: (v: unknown) => v === null || (is.nonNegInt(v) && (v as number) <= 20),
  prompt_logprobs: (v: unknown) => v === null || (is.nonNegInt(v) && (v as number) <= 20),
  return_tokens_as_token_ids: is.bool,
  echo: is.bool,
  stop: is.stop,
  stream: is.bool,
  stream_options: is.object,
  top_k: is.int,
  ignore_eos: is.bool,
  stop_token_ids: is.ints,
  skip_special_tokens: is.bool,
  return_token_ids: is.bool,
  seed: is.int,
  n: (v: unknown) => v === 1,
};

export class FakeOpenAi {
  readonly requests: Record<string, unknown>[] = [];
  /** The `X-SMG-Routing-Key` header of each of `requests` (null when absent). */
  readonly routingKeys: (string | null)[] = [];
  /** Hanging requests whose client went away. */
  disconnects = 0;
  private readonly cache = new RadixCacheSim();
  private readonly server: ReturnType<typeof Bun.serve>;

  constructor(
    private readonly model: DecoderModel,
    private readonly tokenizer: TextTokenizer,
    public options: FakeOpenAiOptions = {},
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
    if (request.method === 'GET' && path === '/v1/models') return Response.json({ object: 'list', data: [{ id: 'stories260k', object: 'model' }] });
    if (request.method !== 'POST' || path !== '/v1/completions') return this.error(404, `no route ${path}`);
    const body = (await request.json()) as Record<string, unknown>;
    this.requests.push(body);
    this.routingKeys.push(request.headers.get('x-smg-routing-key'));
    const problems = checkFields(body, REQUEST_SPEC, 'body');
    if (typeof body.model !== 'string') problems.push('body: model is required');
    // vLLM: no new tokens only as an echo of the prompt.
    if (body.max_tokens === 0 && body.echo !== true) problems.push('max_tokens must be at least 1, got 0.');
    if (body.echo === true && body.stream === true) problems.push('this fake does not echo while streaming');
    if (problems.length) return this.error(400, problems.join('; '));
    if (this.options.fail) return this.error(400, this.options.fail);
    if (this.options.hang) {
      await disconnected(request);
      this.disconnects++;
      return new Response(null, { status: 499 });
    }
    const input = typeof body.prompt === 'string' ? this.tokenizer.encode(body.prompt) : (body.prompt as number[]);
    const { vocabSize, maxPositions } = this.model.pack;
    if (input.length === 0 || input.some((id) => id < 0 || id >= vocabSize)) return this.error(400, 'prompt holds invalid token ids');
    if (input.length >= maxPositions) return this.error(400, `This model's maximum context length is ${maxPositions} tokens.`);

    const topN = (body.logprobs as number | null | undefined) ?? 0;
    const generation = await fakeGenerate(this.model, this.tokenizer, input, {
      maxNewTokens: (body.max_tokens as number | undefined) ?? 16,
      temperature: (body.temperature as number | undefined) ?? 1,
      topP: (body.top_p as number | undefined) ?? 1,
      stopTokenIds: (body.stop_token_ids as number[] | undefined) ?? [],
      ignoreEos: (body.ignore_eos as boolean | undefined) ?? false,
      topN: this.options.extraTopEntry ? topN + 1 : topN,
      seed: (body.seed as number | undefined) ?? 99,
    });
    const cached = this.cache.cachedTokens(input);
    this.cache.remember([...input, ...generation.ids]);
    const withIds = body.return_token_ids === true && this.options.tokenIds !== false;
    const withLogprobs = body.logprobs !== undefined && body.logprobs !== null;
    const asTokenIds = this.options.tokenIdStrings === true || (body.return_tokens_as_token_ids === true && !this.options.noTokenIdsAsTokens);
    const usage = {
      prompt_tokens: input.length,
      completion_tokens: generation.ids.length,
      total_tokens: input.length + generation.ids.length,
      prompt_tokens_details: { cached_tokens: cached },
    };
    const finish = generation.matched !== undefined ? 'stop' : 'length';
    const base = { id: 'cmpl-fake', object: 'text_completion', created: 1730000000, model: body.model };

    if (body.stream !== true) {
      const choice = this.choice(generation, 0, generation.ids.length, withIds, withLogprobs, asTokenIds, input);
      const promptN = this.options.noPromptLogprobs ? null : ((body.prompt_logprobs as number | null | undefined) ?? null);
      const echo = body.echo === true && !this.options.noEcho;
      if (promptN !== null || echo) {
        const prompt = await fakePromptLogprobs(this.model, input, Math.max(promptN ?? 0, topN));
        if (promptN !== null) choice.prompt_logprobs = this.promptLogprobs(prompt, input, promptN);
        if (echo) this.echo(choice, prompt, input, topN, asTokenIds);
      }
      return Response.json({ ...base, choices: [{ index: 0, ...choice, finish_reason: finish }], usage });
    }
    const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const self = this;
    return sse(
      (function* () {
        for (let i = 0; i < generation.ids.length; i++) {
          if (self.options.streamError && i === 1) {
            yield { error: { message: self.options.streamError, type: 'InternalServerError', code: 500 } };
            return;
          }
          const last = i === generation.ids.length - 1;
          yield {
            ...base,
            choices: [
              {
                index: 0,
                ...self.choice(generation, i, i + 1, withIds, withLogprobs, asTokenIds, i === 0 ? input : undefined),
                finish_reason: last ? finish : null,
              },
            ],
          };
        }
        if (includeUsage) yield { ...base, choices: [], usage };
      })(),
    );
  }

  private choice(
    g: FakeGeneration,
    from: number,
    to: number,
    withIds: boolean,
    withLogprobs: boolean,
    asTokenIds: boolean,
    prompt: number[] | undefined,
  ): Record<string, unknown> {
    // The text leaves out a matched stop token, as both servers do by default.
    const pieces = g.pieces.slice(from, to).map((piece, i) => (g.matched !== undefined && from + i === g.ids.length - 1 ? '' : piece));
    const token = (id: number, piece: string) => (asTokenIds ? `token_id:${id}` : piece);
    const out: Record<string, unknown> = { text: pieces.join('') };
    if (withLogprobs) {
      out.logprobs = {
        tokens: g.ids.slice(from, to).map((id, i) => token(id, pieces[i]!)),
        token_logprobs: g.logprobs.slice(from, to),
        top_logprobs: g.top.slice(from, to).map((alts) => Object.fromEntries(alts.map((a) => [token(a.id, this.tokenizer.decode([a.id])), a.logprob]))),
        text_offset: pieces.map((_, i) => pieces.slice(0, i).join('').length),
      };
    } else out.logprobs = null;
    if (withIds) {
      out.token_ids = g.ids.slice(from, to);
      if (prompt) out.prompt_token_ids = prompt;
    }
    return out;
  }

  /** vLLM's `prompt_logprobs`: per position the top `n` and the prompt's own id, keyed by id. */
  private promptLogprobs(prompt: (FakePromptPosition | null)[], input: number[], n: number): unknown[] {
    return prompt.map((p, j) => {
      if (!p) return null;
      const entries = [...p.top.slice(0, n).map((a, r) => [a.id, a.logprob, r + 1] as const), [input[j]!, p.logprob, p.rank] as const];
      return Object.fromEntries(entries.map(([id, logprob, rank]) => [String(id), { logprob, rank, decoded_token: this.tokenizer.decode([id]) }]));
    });
  }

  /** The legacy echo: the prompt's entries before the generated ones, the first with no log-probability. */
  private echo(choice: Record<string, unknown>, prompt: (FakePromptPosition | null)[], input: number[], topN: number, asTokenIds: boolean): void {
    const text = (id: number) => (asTokenIds ? `token_id:${id}` : this.tokenizer.decode([id]));
    const promptText = this.tokenizer.decode(input);
    choice.text = promptText + (choice.text as string);
    const generated = choice.logprobs as Record<string, unknown[]> | null;
    if (!generated) return;
    // vLLM's dicts hold the prompt's own token too (N+1 entries); SGLang's exactly N.
    const top = prompt.map((p, j) => {
      if (!p) return null;
      const alts = p.top.slice(0, topN).map((a) => [a.id, a.logprob] as const);
      if (this.options.extraTopEntry) alts.push([input[j]!, p.logprob]);
      return Object.fromEntries(alts.map(([id, logprob]) => [text(id), logprob]));
    });
    const offsets = input.map((_, j) => this.tokenizer.decode(input.slice(0, j)).length);
    choice.logprobs = {
      tokens: [...input.map(text), ...generated.tokens!],
      token_logprobs: [...prompt.map((p) => p?.logprob ?? null), ...generated.token_logprobs!],
      top_logprobs: [...top, ...generated.top_logprobs!],
      text_offset: [...offsets, ...generated.text_offset!.map((o) => (o as number) + promptText.length)],
    };
  }

  private error(status: number, message: string): Response {
    const type = status === 404 ? 'NotFoundError' : 'BadRequestError';
    if (this.options.errors === 'vllm') return Response.json({ error: { message, type, code: status } }, { status });
    return Response.json({ object: 'error', message, type, param: null, code: status }, { status });
  }
}
