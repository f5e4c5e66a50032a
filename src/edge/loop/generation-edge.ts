/**
 * One generation's side of the edge model: its sequence (the KV cache), its outputs at the position being
 * decided, the forward-pass time not yet given to a token, and its picks from the generation's random
 * stream. GenerationState owns one; the loop prefills and advances it, and speculation decodes ahead on it
 * and keeps or returns (`markAhead`, `feedAhead`, `keepAhead`, `returnTo`), all through these methods.
 *
 * @example
 * const edge = new GenerationEdge(engine, request, metrics);
 * await edge.prefill(context);
 * const token = edge.pick(edge.last!);
 * await edge.feed([token]);
 */
import type { AppendableSequence, AppendResult } from '../../shared/model/decoder-model.ts';
import { sampleToken, type SamplingOptions } from '../../shared/model/sampling.ts';
import type { EdgeEngine, LoopRequest } from './edge-engine.ts';
import type { MetricsRecorder } from './generation-metrics.ts';
import { ReplayableRandom } from './replayable-random.ts';

export function elapsed(since: number): number {
  return performance.now() - since;
}

export class GenerationEdge {
  private readonly random: ReplayableRandom;
  private sequence: AppendableSequence | undefined;
  private outputs: AppendResult | undefined;
  /** Edge model time not yet attributed to a token: the forward pass that produced the logits in use. */
  private unattributedMs = 0;

  constructor(
    private readonly engine: EdgeEngine,
    private readonly request: LoopRequest,
    private readonly metrics: MetricsRecorder,
  ) {
    this.random = new ReplayableRandom(request.seed);
  }

  /** The edge model's outputs at the position being decided; undefined before the prefill. */
  get last(): AppendResult | undefined {
    return this.outputs;
  }

  /** Whether the edge's cache holds the context: prefilled, or not yet (llm_only, until the cloud fails). */
  get prefilled(): boolean {
    return this.sequence !== undefined;
  }

  /**
   * A new sequence fed `context` in one forward pass; with a prompt cache, it starts from the longest cached
   * prefix and only the rest is fed. The prompt's cache is then kept at once, so a concurrent request with the
   * same head finds it while this one runs.
   */
  async prefill(context: readonly number[]): Promise<void> {
    const { promptCache, edgeModel, scheduler } = this.engine;
    const start = promptCache ? promptCache.newSequence(context) : { sequence: edgeModel.newSequence(), cachedTokens: 0 };
    this.sequence = scheduler ? scheduler.sequence(start.sequence) : start.sequence;
    this.metrics.cachedTokens = start.cachedTokens;
    await this.feed(context.slice(start.cachedTokens));
    promptCache?.keep(this.sequence);
  }

  /** Appends `ids` to the cache; their forward pass is the next token's edge time. */
  async feed(ids: number[]): Promise<void> {
    const t = performance.now();
    this.outputs = await this.sequence!.append(ids);
    if (ids.length === 1) this.metrics.decodePass(this.outputs.batchSize);
    const ms = elapsed(t);
    this.metrics.slmMs += ms;
    this.unattributedMs += ms;
  }

  /** A position decoded ahead and kept becomes the one being decided: its forward pass was run while waiting. */
  decideKeptPosition(outputs: AppendResult, slmMs: number): void {
    this.outputs = outputs;
    this.unattributedMs = slmMs;
  }

  /** The edge model time behind the position just decided, given now to its token. */
  takeSlmMs(): number {
    const ms = this.unattributedMs;
    this.unattributedMs = 0;
    return ms;
  }

  /**
   * Decoding ahead from here: the cache and the random stream can come back (`returnTo`). Returns the random
   * stream's mark. One mark per chain, nested for the chain behind it.
   */
  markAhead(): number {
    this.sequence!.checkpoint();
    return this.random.draws;
  }

  /** Appends one token decoded ahead, not yet decided: its outputs and forward-pass time, which the caller keeps. */
  async feedAhead(token: number): Promise<{ result: AppendResult; ms: number }> {
    const t = performance.now();
    const result = await this.sequence!.append([token]);
    this.metrics.decodePass(result.batchSize);
    return { result, ms: elapsed(t) };
  }

  /** What was decoded ahead since the last mark is kept: the mark is dropped. */
  keepAhead(): void {
    this.sequence!.commit();
  }

  /** What was decoded ahead since the last mark is thrown away: the cache, the random stream and the position being decided (`outputs`) go back. */
  returnTo(outputs: AppendResult, draws: number): void {
    this.sequence!.rollback();
    this.random.rewind(draws);
    this.outputs = outputs;
  }

  /** The edge's own token at a position: the request's sampling, drawing from the generation's random stream. */
  pick(result: AppendResult): number {
    return sampleToken(result.logits, this.sampling());
  }

  /** The request's sampling, drawing from the generation's random stream. */
  sampling(): SamplingOptions {
    const { temperature, topP } = this.request;
    return { temperature, topP, random: this.random.next, vocabLimit: this.engine.tokenizer.vocabSize };
  }

  /** The edge's top-1 token at a position: what decoding ahead assumes the cloud will answer. */
  guess(result: AppendResult): number {
    return sampleToken(result.logits, { temperature: 0, topP: 1, random: this.random.next, vocabLimit: this.engine.tokenizer.vocabSize });
  }

  /** Leaves the cache (prompt and output) to the prompt cache, then releases it. */
  release(): void {
    if (this.sequence) this.engine.promptCache?.keep(this.sequence);
    this.sequence?.dispose();
  }
}
