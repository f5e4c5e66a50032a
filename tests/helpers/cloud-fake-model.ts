/**
 * What the fake SGLang and OpenAI servers compute their answers with: the real cloud model (a fresh KV
 * cache per request, as a server without our session would), its prompt log-probabilities from one forward
 * pass over every position, and a radix-cache simulation for `cached_tokens`.
 */
import type { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { logSoftmax, topK } from '../../src/shared/model/logits.ts';
import { sampleToken } from '../../src/shared/model/sampling.ts';
import { seededRandom } from '../../src/shared/seeded-random.ts';
import type { TextTokenizer } from '../../src/shared/text/tokenizer.ts';

export interface FakeGenerateOptions {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  stopTokenIds: readonly number[];
  ignoreEos: boolean;
  topN: number;
  seed: number;
}

export interface FakeGeneration {
  ids: number[];
  logprobs: number[];
  top: { id: number; logprob: number }[][];
  /** The matched stop id, or undefined when the length limit ended the output. */
  matched: number | undefined;
  /** Text of each token as it continues the context. */
  pieces: string[];
}

export async function fakeGenerate(model: DecoderModel, tokenizer: TextTokenizer, input: readonly number[], o: FakeGenerateOptions): Promise<FakeGeneration> {
  const eos = model.pack.eosTokenIds;
  const sequence = model.newSequence();
  const random = seededRandom(o.seed);
  const out: FakeGeneration = { ids: [], logprobs: [], top: [], matched: undefined, pieces: [] };
  if (o.maxNewTokens === 0) return out;
  try {
    let { logits } = await sequence.append(input);
    while (out.ids.length < o.maxNewTokens) {
      const id = sampleToken(logits, { temperature: o.temperature, topP: o.topP, random });
      const all = logSoftmax(logits);
      out.ids.push(id);
      out.logprobs.push(all[id]!);
      out.top.push(o.topN > 0 ? topK(all, o.topN).map(({ id: alt, value }) => ({ id: alt, logprob: value })) : []);
      if (o.stopTokenIds.includes(id) || (!o.ignoreEos && eos.includes(id))) {
        out.matched = id;
        break;
      }
      if (out.ids.length < o.maxNewTokens) logits = (await sequence.append([id])).logits;
    }
  } finally {
    sequence.dispose();
  }
  const tail = input.slice(-4);
  let previous = tokenizer.decode(tail);
  for (let i = 0; i < out.ids.length; i++) {
    const text = tokenizer.decode([...tail, ...out.ids.slice(0, i + 1)]);
    out.pieces.push(text.startsWith(previous) ? text.slice(previous.length) : '');
    previous = text;
  }
  return out;
}

/** The model at input position j ≥ 1: what it thought of input[j] having read input[0..j-1]. */
export interface FakePromptPosition {
  /** log p(input[j] | input[<j]). */
  logprob: number;
  /** input[j]'s place in that distribution, 1 = most likely (vLLM's `rank`). */
  rank: number;
  top: { id: number; logprob: number }[];
  /** The log-probabilities of `requestedIds`, in their order. */
  requested: { id: number; logprob: number }[];
}

/**
 * Prompt log-probabilities as a server computes them: one forward pass over every position, as
 * src/shared/model/position-scores.ts does. Entry 0 is null (nothing predicts the first id).
 */
export async function fakePromptLogprobs(
  model: DecoderModel,
  input: readonly number[],
  topN: number,
  requestedIds: readonly number[] = [],
): Promise<(FakePromptPosition | null)[]> {
  const sequence = model.newSequence();
  try {
    const { allLogits } = await sequence.append(input, { allPositions: true });
    const width = model.pack.vocabSize;
    const out: (FakePromptPosition | null)[] = [null];
    for (let j = 1; j < input.length; j++) {
      const log = logSoftmax(allLogits!.subarray((j - 1) * width, j * width));
      const own = log[input[j]!]!;
      let rank = 1;
      for (const value of log) if (value > own) rank++;
      out.push({
        logprob: own,
        rank,
        top: topK(log, topN).map(({ id, value }) => ({ id, logprob: value })),
        requested: requestedIds.map((id) => ({ id, logprob: log[id] ?? -Infinity })),
      });
    }
    return out;
  } finally {
    sequence.dispose();
  }
}

/** Longest prefix each request shares with anything served before: what a radix cache would reuse. */
export class RadixCacheSim {
  private readonly seen: number[][] = [];

  cachedTokens(input: readonly number[]): number {
    let best = 0;
    for (const s of this.seen) {
      let n = 0;
      while (n < s.length && n < input.length && s[n] === input[n]) n++;
      best = Math.max(best, n);
    }
    return Math.min(best, input.length - 1);
  }

  remember(tokens: readonly number[]): void {
    this.seen.push([...tokens]);
  }
}

/** A request that validates like pydantic: each problem as a readable string. */
export function checkFields(body: Record<string, unknown>, spec: Record<string, (v: unknown) => boolean>, where: string): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    const check = spec[key];
    if (!check) problems.push(`${where}: unexpected field ${JSON.stringify(key)}`);
    else if (!check(value)) problems.push(`${where}: invalid value for ${key}: ${JSON.stringify(value)}`);
  }
  return problems;
}

export const is = {
  int: (v: unknown) => Number.isInteger(v),
  nonNegInt: (v: unknown) => Number.isInteger(v) && (v as number) >= 0,
  number: (v: unknown) => typeof v === 'number' && Number.isFinite(v),
  bool: (v: unknown) => typeof v === 'boolean',
  string: (v: unknown) => typeof v === 'string',
  ints: (v: unknown) => Array.isArray(v) && v.every((x) => Number.isInteger(x)),
  stop: (v: unknown) => typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string')),
  object: (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v),
};

/** Resolves when the client closes the connection of `request`. */
export function disconnected(request: Request): Promise<void> {
  return new Promise((resolve) => {
    if (request.signal.aborted) resolve();
    request.signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

export function sse(events: AsyncIterable<unknown> | Iterable<unknown>): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      for await (const event of events) controller.enqueue(encoder.encode(`data: ${JSON.stringify(event)}\n\n`));
      controller.enqueue(encoder.encode('data: [DONE]\n\n'));
      controller.close();
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
}
