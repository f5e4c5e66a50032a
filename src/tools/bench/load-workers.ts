/**
 * The workers of `bench load`'s two phases: edge streams of routed steps against the shim (sessions
 * churn), and generation slots of one edge runtime; each counts into a phase's Tally and stops at its
 * first error.
 *
 * @example
 * const tally = new Tally();
 * await Promise.all(clients.map((client, i) => streamWorker(client, corpus, i, deadline, 10, STEPS_PER_SESSION, tally)));
 */
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import type { DoneEvent } from '../../edge/loop/decoder-loop.ts';
import type { EdgeRuntime } from '../../edge/edge-runtime.ts';
import type { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { DEMO } from '../../shared/paths.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { CloudGate } from '../../edge/cloud/cloud-gate.ts';

/** Routed steps per session before it is closed and a fresh one opened. */
export const STEPS_PER_SESSION = 32;
/** Prompt windows of 24 to 87 tokens (plus BOS): sessions of different sizes. */
const MIN_PROMPT_TOKENS = 24;
const PROMPT_SPREAD = 64;
export const GENERATION_MAX_NEW_TOKENS = 48;
/**
 * The demo router scores most tokens below this, so most of a generation's tokens go to the shim
 * (docs/results.md, "The shim under sustained load", counts them).
 */
const GENERATION_THRESHOLD = 0.95;

/** Counters of one phase, shared by its workers. */
export class Tally {
  completed = 0;
  sessions = 0;
  errors = 0;
  tokens = 0;
  routed = 0;
  readonly stepMs: number[] = [];
  readonly messages = new Set<string>();

  fail(e: unknown): void {
    this.errors++;
    if (this.messages.size < 5) this.messages.add(errorMessage(e));
  }
}

/** Real text: the TinyStories excerpt as token ids, and its stories' opening sentences as prompts. */
export interface Corpus {
  bos: number;
  ids: number[];
  prompts: string[];
}

export async function loadCorpus(pack: string): Promise<Corpus> {
  const tokenizer = await TextTokenizer.fromPack(pack);
  const text = await Bun.file(DEMO.tinyStories).text();
  const ids = tokenizer.encode(text.slice(0, 40_000), { addBos: false });
  const prompts = text
    .split('\n\n')
    .slice(0, 200)
    .map((paragraph) => paragraph.trim().split(/(?<=[.!?])\s/)[0]!)
    .filter((sentence) => sentence.length >= 20 && sentence.length <= 200);
  if (tokenizer.bosId === undefined || ids.length < 1_000 || prompts.length < 10) {
    throw new AppError('FAILED_PRECONDITION', `${DEMO.tinyStories} or ${pack} does not give enough text to load with`);
  }
  return { bos: tokenizer.bosId, ids, prompts };
}

/**
 * The prompt of session `session` of edge stream `index`: BOS and a window of the text, of a length and
 * at a place that vary with both, leaving `after` tokens of text after it for the edge's own tokens.
 * `next` is the position in `corpus.ids` of the first of those.
 */
export function promptWindow(corpus: Corpus, index: number, session: number, after: number): { context: number[]; next: number } {
  const room = corpus.ids.length - MIN_PROMPT_TOKENS - PROMPT_SPREAD - after;
  const length = MIN_PROMPT_TOKENS + ((index * 7 + session) % PROMPT_SPREAD);
  const start = (index * 997 + session * 131) % room;
  return { context: [corpus.bos, ...corpus.ids.slice(start, start + length)], next: start + length };
}

/**
 * One edge stream: sessions of STEPS_PER_SESSION routed steps each until `deadline` or `maxSessions`.
 * Between steps the context grows by the shim's token and the next token of the text (the edge's).
 */
export async function streamWorker(
  client: GrpcCloudClient,
  corpus: Corpus,
  index: number,
  deadline: number,
  maxSessions: number,
  steps: number,
  tally: Tally,
): Promise<void> {
  for (let s = 0; s < maxSessions && performance.now() < deadline; s++) {
    const window = promptWindow(corpus, index, s, steps);
    const { context } = window;
    const sources: TokenSource[] = context.map(() => 'prompt');
    let edgeAt = window.next;
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `load-${index}-${s}` });
    try {
      for (let k = 0; k < steps; k++) {
        const started = performance.now();
        const reply = await conversation.next({
          context,
          sources,
          tokenIndex: k,
          maxTokens: 1,
          temperature: 0,
          topP: 1,
          stopTokenIds: [],
          routerScore: 0.2,
          threshold: 0.5,
          topLogprobs: 0,
        });
        tally.stepMs.push(performance.now() - started);
        if (reply.tokens.length !== 1) throw new AppError('INTERNAL', `a one-token step returned ${reply.tokens.length} tokens`);
        tally.completed++;
        context.push(reply.tokens[0]!, corpus.ids[edgeAt++]!);
        sources.push('llm', 'slm');
      }
      tally.sessions++;
    } catch (e) {
      tally.fail(e);
      return;
    } finally {
      await conversation.close();
    }
  }
}

/** One generation slot of the edge: joint generations back to back until `deadline` or `maxGenerations`. */
export async function generationWorker(
  runtime: EdgeRuntime,
  corpus: Corpus,
  index: number,
  deadline: number,
  maxGenerations: number,
  maxNewTokens: number,
  tally: Tally,
): Promise<void> {
  for (let g = 0; g < maxGenerations && performance.now() < deadline; g++) {
    const prompt = corpus.prompts[(index * 17 + g) % corpus.prompts.length]!;
    try {
      const { events } = runtime.start({ prompt, mode: 'joint', threshold: GENERATION_THRESHOLD, maxNewTokens, seed: index });
      let done: DoneEvent | undefined;
      let fallbackError: string | undefined;
      for await (const event of events()) {
        if (event.type === 'done') done = event;
        else if (event.source === 'fallback') fallbackError ??= event.cloudError ?? 'the cloud did not serve a routed token';
        // A span's later tokens carry no timing: only the step's first token measures the round trip.
        else if (event.source === 'llm' && event.score !== null) tally.stepMs.push(event.timings.cloudMs);
      }
      if (fallbackError !== undefined) throw new AppError('UNAVAILABLE', `fallback token: ${fallbackError}`);
      if (!done || done.finishReason === 'cancelled') throw new AppError('CANCELLED', 'the generation did not finish');
      tally.completed++;
      tally.tokens += done.metrics.tokens;
      tally.routed += done.metrics.routed;
    } catch (e) {
      tally.fail(e);
      return;
    }
  }
}
