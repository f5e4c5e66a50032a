/**
 * An SGLang server stand-in for `bench fleet`: it speaks SGLang's native API as ../shared/SGLANG_API.md
 * describes it and as src/cloud/backends/sglang-backend.ts reads it (`POST /generate` with `input_ids`, streaming
 * or not, `return_logprob`, `meta_info` with `prompt_tokens`, `completion_tokens`, `cached_tokens` and
 * `e2e_latency`, `output_ids`; `POST /abort_request`, `GET /health`, `GET /get_model_info`), and answers
 * after a modelled service time instead of running a model, so that what the benchmark measures is the
 * shim's own cost.
 *
 * The service-time model, per request: `prefillMsPerToken` × the tokens not found in the prefix cache,
 * then `serviceMs` per generated token (one decode step each). Requests are served concurrently, as
 * SGLang's continuous batching puts every running request into each forward pass: by default the fake never
 * queues, so latency that climbs with the fleet is the shim's or the network's. With `slots` it has a real
 * capacity, as a server whose running batch is full (SGLang's `--max-running-requests`): at most `slots`
 * requests are served at once and the rest wait in arrival order, so it serves `slots` / service time
 * requests per second and a request beyond that waits for one to finish. `cached_tokens` comes from a real
 * prefix cache (token-trie.ts, bounded, LRU), as RadixAttention reports it: a session that resends its
 * growing context finds all but its new tokens cached. The next id is a hash of the last three ids into
 * the vocabulary: deterministic, and the same for the same context.
 *
 * Also accepts the optional `routing_key` body field (SGLang's, for its model gateway) and ignores it.
 * Runs in its own process (`bun sglang-service-fake.ts '<json options>'`, reporting `{type: 'ready', url}`
 * over IPC) so that its CPU is apart from the shim's.
 *
 * @example
 * const fake = serveSglangFake({ vocabSize: 512, maxContext: 512, serviceMs: 2, prefillMsPerToken: 0.01, cacheTokens: 1 << 18 });
 * await fetch(`${fake.url}/generate`, { method: 'POST', body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 1 } }) });
 * await fake.stop();
 */
import { FifoSlots } from '../../shared/process/fifo-slots.ts';
import { errorMessage } from '../../shared/errors.ts';
import { TokenTrie } from './token-trie.ts';

export interface SglangFakeOptions {
  vocabSize: number;
  /** Context window: a longer input is refused with SGLang's 400. */
  maxContext: number;
  /** One decode step, per generated token. */
  serviceMs: number;
  /** Prefill cost of each input token not found in the prefix cache. */
  prefillMsPerToken: number;
  /** Tokens the prefix cache holds (SGLang: its KV pool). */
  cacheTokens: number;
  /** Most requests served at once, the rest waiting in arrival order; absent = no limit. */
  slots?: number;
}

export interface SglangFake {
  readonly url: string;
  stop(): Promise<void>;
}

/** Every body field SGLang's `/generate` takes that the shim may send, with its check. */
const FIELDS: Record<string, (v: unknown) => boolean> = {
  input_ids: (v) => Array.isArray(v) && v.every(Number.isInteger),
  sampling_params: (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  return_logprob: (v) => typeof v === 'boolean',
  logprob_start_len: Number.isInteger,
  top_logprobs_num: (v) => Number.isInteger(v) && (v as number) >= 0,
  return_text_in_logprobs: (v) => typeof v === 'boolean',
  stream: (v) => typeof v === 'boolean',
  rid: (v) => typeof v === 'string',
  routing_key: (v) => typeof v === 'string',
};

const STEP_LOGPROB = -0.25;

function badRequest(message: string): Response {
  return Response.json({ object: 'error', message, type: 'Bad Request', param: null, code: 400 }, { status: 400 });
}

/** A deterministic next token: a hash of the last three ids, within the vocabulary. */
export function nextFakeId(ids: readonly number[], vocabSize: number): number {
  let hash = 2166136261;
  for (let i = Math.max(0, ids.length - 3); i < ids.length; i++) hash = Math.imul(hash ^ ids[i]!, 16777619);
  return (hash >>> 0) % vocabSize;
}

export function serveSglangFake(options: SglangFakeOptions): SglangFake {
  const cache = new TokenTrie({ capacity: options.cacheTokens, evictTo: Math.floor(options.cacheTokens * 0.9) });
  const slots = options.slots === undefined ? undefined : new FifoSlots(options.slots);
  const serving = async (): Promise<() => void> => (slots ? slots.acquire() : () => {});

  async function generate(request: Request): Promise<Response> {
    const started = performance.now();
    let body: Record<string, unknown>;
    try {
      body = (await request.json()) as Record<string, unknown>;
    } catch (e) {
      return badRequest(`body is not JSON: ${errorMessage(e)}`);
    }
    for (const [key, value] of Object.entries(body)) {
      if (!FIELDS[key]) return badRequest(`unexpected field ${JSON.stringify(key)}`);
      if (!FIELDS[key]!(value)) return badRequest(`invalid value for ${key}: ${JSON.stringify(value)?.slice(0, 100)}`);
    }
    const input = (body.input_ids ?? []) as number[];
    if (input.length === 0) return Response.json({ error: { message: 'input_ids cannot be empty.' } }, { status: 400 });
    if (input.some((id) => id < 0 || id >= options.vocabSize))
      return Response.json({ error: { message: `Token ids must be in [0, ${options.vocabSize}).` } }, { status: 400 });
    if (input.length >= options.maxContext) {
      return Response.json(
        { error: { message: `The input (${input.length} tokens) is longer than the model's context length (${options.maxContext} tokens).` } },
        { status: 400 },
      );
    }
    const sampling = (body.sampling_params ?? {}) as Record<string, unknown>;
    const maxNew = Number.isInteger(sampling.max_new_tokens) ? (sampling.max_new_tokens as number) : 128;
    const stopIds = Array.isArray(sampling.stop_token_ids) ? (sampling.stop_token_ids as number[]) : [];
    const topN = (body.top_logprobs_num as number | undefined) ?? 0;
    const rid = (body.rid as string | undefined) ?? crypto.randomUUID().replaceAll('-', '');
    // At least the last input token is computed, as SGLang's radix match leaves it out.
    const cached = Math.min(cache.match(input), input.length - 1);

    const ids: number[] = [];
    const sequence = [...input];
    let matched: number | undefined;
    const chunk = (from: number, last: boolean) => {
      const meta: Record<string, unknown> = {
        id: rid,
        finish_reason: !last ? null : matched !== undefined ? { type: 'stop', matched } : { type: 'length', length: ids.length },
        prompt_tokens: input.length,
        completion_tokens: ids.length,
        cached_tokens: cached,
        e2e_latency: (performance.now() - started) / 1000,
      };
      if (body.return_logprob === true) {
        meta.output_token_logprobs = ids.slice(from).map((id) => [STEP_LOGPROB, id, null]);
        if (topN > 0)
          meta.output_top_logprobs = ids
            .slice(from)
            .map((id) => Array.from({ length: topN }, (_, k) => [STEP_LOGPROB - k, (id + k) % options.vocabSize, null]));
      }
      return { output_ids: ids.slice(from), meta_info: meta };
    };
    /** One decode step (the first after the prefill of what the cache did not hold); true when it was the last. */
    const decode = async (): Promise<boolean> => {
      const prefill = ids.length === 0 ? (input.length - cached) * options.prefillMsPerToken : 0;
      await Bun.sleep(prefill + options.serviceMs);
      const id = nextFakeId(sequence, options.vocabSize);
      ids.push(id);
      sequence.push(id);
      if (stopIds.includes(id)) matched = id;
      const last = matched !== undefined || ids.length >= maxNew;
      if (last) cache.insert(sequence);
      return last;
    };

    if (body.stream !== true) {
      const release = await serving();
      try {
        while (!(await decode()));
      } finally {
        release();
      }
      return Response.json(chunk(0, true));
    }
    const encoder = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        const release = await serving();
        try {
          // Cumulative chunks, as current builds send without --incremental-streaming-output.
          for (let last = false; !last && !request.signal.aborted; ) {
            last = await decode();
            controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk(0, last))}\n\n`));
          }
        } finally {
          release();
        }
        controller.enqueue(encoder.encode('data: [DONE]\n\n'));
        controller.close();
      },
    });
    return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
  }

  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async (request) => {
      const path = new URL(request.url).pathname;
      if (request.method === 'GET' && path === '/health') return new Response('');
      if (request.method === 'GET' && (path === '/get_model_info' || path === '/model_info')) {
        return Response.json({ model_path: 'sglang-service-fake', tokenizer_path: null, is_generation: true });
      }
      if (request.method === 'POST' && path === '/abort_request') return Response.json({});
      if (request.method === 'POST' && path === '/generate') return generate(request);
      return Response.json({ detail: 'Not Found' }, { status: 404 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

export type SglangFakeReply = { type: 'ready'; url: string } | { type: 'failed'; message: string };

/** Child-process mode: serve until the parent goes away (its IPC channel closes). */
function serveAsChild(): void {
  const send = (reply: SglangFakeReply) => process.send!(reply);
  try {
    const fake = serveSglangFake(JSON.parse(process.argv[2] ?? '{}') as SglangFakeOptions);
    process.on('disconnect', () => void fake.stop().finally(() => process.exit(0)));
    send({ type: 'ready', url: fake.url });
  } catch (e) {
    send({ type: 'failed', message: errorMessage(e) });
    process.exit(1);
  }
}

if (import.meta.main) serveAsChild();
