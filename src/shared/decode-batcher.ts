/**
 * Continuous batching below the decoding loop. Sequences of one `DecoderModel` append as they always do;
 * the batcher runs the one-token appends (decode steps) that are waiting together as one forward pass
 * (batched-step.ts), up to `maxBatch` rows, each row with its own length. Sequences join at their next
 * step and leave when they stop appending; nothing else changes for them (checkpoints, rollbacks and
 * disposal stay per sequence).
 *
 * onnxruntime-node runs a session synchronously on the JavaScript thread, so one pass runs at a time and
 * a step that arrives during a pass waits for the next. After a pass the batcher waits up to `gatherMs`
 * for the sequences of that pass to come back with their next token (each does its router and sampling
 * work in between), so a batch does not split into a pass of one and a pass of the rest.
 *
 * Multi-token appends (prefills, replays) run in pieces of at most `prefillChunk` tokens, one piece
 * between two decode passes: a newcomer's long prompt delays the others by one piece per step, not by the
 * whole prompt. Small pieces protect others only: once no decode pass has run for `quietMs` (nobody
 * generating: a single user's next turn, a kiosk's next visitor), pieces of `quietPrefillChunk` tokens
 * instead. A piece runs alone, except that the first prompts of several new sequences waiting
 * together (users arriving at once, a cache miss each) share one pass: as many tokens of each as the
 * shortest has, `prefillChunk` in all, the rest of each in lone pieces after (so never more passes than
 * alone: cutting every row short of the bound would add one). Measured at the
 * Qwen2.5-0.5B shape on 2 cores, alternating in one process: four 32-token prompts took 420–439 ms in one
 * pass against 561–598 ms one after another at fp32 (q4: 292–381 against 334–431); four users of 16
 * tokens each got 4–23% more tokens/s at fp32 and 8–18% at q4, and the last of them its first token
 * after 392–547 ms instead of 763–824 (fp32). Cutting a prompt by its company changes its floats as
 * batching a step does (a float16 cache: by float16 roundings); tests/batched-decoding.test.ts says how much.
 *
 * Short appends into sequences with a cache (a cloud step's ten-odd tokens, a routed span) share decode
 * passes only where `appendTokens` allows it, in the plain layout: each row's tokens padded before to the
 * longest (batched-step.ts), so every row computes the longest's positions. That pays where a pass costs
 * little more than its fixed work: on the demo cloud model (1 thread, 200 cached positions) one 10-token
 * append took 1.5 ms and a pass of eight 0.43 ms a row; `bench embedded-batching` at 10% routed, where
 * no pass was shared before, served 1.13 to 1.44 times the steps/s (median 1.31 over six alternating
 * pairs; the sessions' prompts, still fed alone, are much of what is left). Where the weights' arithmetic
 * dominates it pays less or not at all: at the Qwen2.5-0.5B shape, q4, four rows of ten tokens took 0.88
 * of four lone appends' time, eight 1.15 (fp32: 0.64 and 0.83). The edge, whose multi-token appends are
 * rare (routed spans, replays), keeps the default, one-token steps only; the cloud shim's embedded
 * backend, where they are most steps below 100% routed, sets it (`--batch-append-tokens`).
 * onnxruntime's GroupQueryAttention refuses such a batch outright once a cache exists ("batch_size must be
 * 1 when sequence_length > 1 and past context is given"), so the fused layout runs them alone.
 *
 * @example
 * const model = await DecoderModel.load(pack, { batching: { maxBatch: 8 } });
 * const [a, b] = [model.newSequence(), model.newSequence()];
 * await Promise.all([a.append([1]), b.append([1])]); // one forward pass of two rows
 */
import { readFileSync } from 'node:fs';
import type { AppendResult, DecoderModel, DecoderSequence } from './decoder-model.ts';
import { AppError, errorMessage } from './errors.ts';
import type { Logger } from './logger.ts';
import { plainPassPoolBytes, runBatchedPass } from './batched-step.ts';
import { KeptBatch } from './kept-batch.ts';

export interface BatchingOptions {
  /** Most sequences in one decode pass; 1 runs every step alone. */
  maxBatch: number;
  /** Most tokens of a multi-token append run in one pass; DEFAULT_PREFILL_CHUNK when omitted. */
  prefillChunk?: number;
  /** How long a decode pass waits for the sequences of the previous one; DEFAULT_GATHER_MS when omitted. */
  gatherMs?: number;
  /**
   * Most tokens of an append into a sequence with a cache that joins a decode pass (a cloud step's context
   * since the step before, a routed span), plain layout only; 1 (decode steps only) when omitted. Every
   * row of a pass computes as many positions as its longest, so this pays where a pass costs little more
   * than its fixed work (a small model), not where the weights' arithmetic dominates.
   */
  appendTokens?: number;
  /** How long after the last decode pass prefills still go in pieces of `prefillChunk`; DEFAULT_QUIET_MS when omitted. */
  quietMs?: number;
  /** Most tokens of a prefill piece once nobody has decoded for `quietMs`; DEFAULT_QUIET_PREFILL_CHUNK when omitted. */
  quietPrefillChunk?: number;
  /** The clock `quietMs` is measured on, in milliseconds; performance.now when omitted (tests pass their own). */
  now?: () => number;
}

/**
 * Pieces of 128 tokens. A 256-token prefill at the Qwen2.5-0.5B shape, fp32, 2 cores (loaded machine):
 * whole 2.9 s; pieces of 128: 3.2 s, 1.6 s the longest; of 64: 4.4 s, 1.2 s; of 32: 5.2 s, 0.9 s. Each
 * pass reads every weight again, so smaller pieces cost the newcomer much more than they save the others.
 * At q4 (cheaper passes) pieces of 128 took 1.8 s each and cost nothing in total.
 */
export const DEFAULT_PREFILL_CHUNK = 128;
/**
 * Long enough for the sequences of a pass to do their router and sampling work and come back (they do
 * it right after the pass, on this thread); waited only while one of them is still missing.
 */
export const DEFAULT_GATHER_MS = 4;
/**
 * A generation steps every few tens of milliseconds (a routed token's round trip included, or hidden by
 * speculation); one that has not for a second is waiting on something slower (a failing cloud, a reader
 * that stopped reading), and a whole prompt's pass before its next step costs it little by comparison.
 */
export const DEFAULT_QUIET_MS = 1000;
/**
 * Pieces of 512 tokens with nobody to protect. A 1,000-token prompt at the Qwen2.5-0.5B shape, 2 cores, in
 * pieces of 128 / 256 / 512 / whole (one process, alternating, medians of three): fp32 2,053 / 1,904 /
 * 1,871 / 1,906 ms, q4 1,694 / 1,703 / 1,724 / 1,771 ms. An fp32 pass pays for reading every weight
 * again (47 ms), so fewer pieces win; a q4 pass reads a fraction of that, and its 4-bit products of many
 * rows at once run slower than a few hundred at a time. Through the loop with the edge's batcher, a cold
 * prompt's first token in pieces of 512 against 128 (alternating): fp32 396 tokens 736–743 ms against
 * 837–866, 1,000 tokens 1.87–1.93 s against 2.06–2.12; q4 the same either way.
 */
export const DEFAULT_QUIET_PREFILL_CHUNK = 512;

/**
 * Decode passes and their rows, for metrics: `sizes[n]` counts passes of n rows; `promptsTogether`: first
 * prompts fed in a shared pass; `keptBuffersReused`: batched passes that fed the kept batch buffers
 * instead of gathering every row's cache (kept-batch.ts), `keptRowsCopied` the rows they copied in.
 */
export interface BatcherStats {
  passes: number;
  rows: number;
  sizes: number[];
  promptsTogether: number;
  keptBuffersReused: number;
  keptRowsCopied: number;
}

interface Waiting {
  sequence: DecoderSequence;
  resolve: (result: AppendResult) => void;
  reject: (error: unknown) => void;
}
interface DecodeStep extends Waiting {
  /** One token, or up to `appendTokens` into a sequence with a cache. */
  tokens: readonly number[];
}
interface Prefill extends Waiting {
  tokens: readonly number[];
  done: number;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const disposedWhileQueued = () => new AppError('FAILED_PRECONDITION', 'sequence disposed while its append was queued');

export class DecodeBatcher {
  readonly stats: BatcherStats = { passes: 0, rows: 0, sizes: [], promptsTogether: 0, keptBuffersReused: 0, keptRowsCopied: 0 };
  readonly prefillChunk: number;
  readonly gatherMs: number;
  readonly appendTokens: number;
  readonly quietMs: number;
  readonly quietPrefillChunk: number;
  private readonly now: () => number;
  /** When the last decode pass ended, on `now`'s clock; -Infinity before the first. */
  private lastDecodeAt = -Infinity;
  private steps: DecodeStep[] = [];
  private prefills: Prefill[] = [];
  /** The sequences of the last decode pass: the next one waits a moment for them. */
  private lastPass = new Set<DecoderSequence>();
  private running = false;
  /** The fused layout's batch buffers, kept from pass to pass with a row per sequence; it counts into `stats`. */
  private readonly kept = new KeptBatch(this.stats);

  private constructor(
    private readonly model: DecoderModel,
    readonly maxBatch: number,
    options: BatchingOptions,
  ) {
    this.prefillChunk = options.prefillChunk ?? DEFAULT_PREFILL_CHUNK;
    this.gatherMs = options.gatherMs ?? DEFAULT_GATHER_MS;
    this.quietMs = options.quietMs ?? DEFAULT_QUIET_MS;
    this.quietPrefillChunk = options.quietPrefillChunk ?? DEFAULT_QUIET_PREFILL_CHUNK;
    this.now = options.now ?? (() => performance.now());
    // GroupQueryAttention takes several positions per row only as first prompts (batched-step.ts).
    this.appendTokens = model.io.layout === 'plain' ? (options.appendTokens ?? 1) : 1;
  }

  /** Why `model`'s export cannot run a batch that gives each row what it gives alone; undefined when it can. */
  static refusal(model: DecoderModel): string | undefined {
    const { io } = model;
    if (io.layout === 'plain' && !(io.mask && io.positions)) return 'the export takes no attention_mask or no position_ids, which left-padded rows need';
    // The op's name in the graph file (weights kept outside it are not read). Its one scale per tensor
    // would be shared by every row of a batch: a row's rounding would depend on its batch mates.
    if (readFileSync(model.pack.modelPath).includes('DynamicQuantizeLinear')) return 'the export quantizes activations with one scale per tensor (DynamicQuantizeLinear), which would mix the rows of a batch';
    return undefined;
  }

  /** A batcher for `model`, or undefined when `maxBatch` is 1 or the export cannot take a batch (logged). */
  static over(model: DecoderModel, options: BatchingOptions, log?: Logger): DecodeBatcher | undefined {
    for (const [name, value] of Object.entries(options)) {
      if (name === 'now') continue;
      const least = name === 'gatherMs' || name === 'quietMs' ? 0 : 1;
      if (value !== undefined && (!Number.isInteger(value) || value < least)) throw new AppError('INVALID_ARGUMENT', `batching.${name} must be a whole number ≥ ${least}, got ${value}`);
    }
    if (options.maxBatch <= 1) return undefined;
    const refusal = DecodeBatcher.refusal(model);
    if (refusal) {
      log?.warn(`${model.pack.dir}: decode steps run one sequence at a time: ${refusal}`);
      return undefined;
    }
    return new DecodeBatcher(model, options.maxBatch, options);
  }

  /** Queues `tokens` (already checked by the sequence) for `sequence`; resolves as its append. */
  append(sequence: DecoderSequence, tokens: readonly number[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      if (tokens.length === 1 || (tokens.length <= this.appendTokens && sequence.length > 0)) this.steps.push({ sequence, tokens, resolve, reject });
      else this.prefills.push({ sequence, tokens, done: 0, resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  /** Drops what `sequence` has queued (it was disposed): its appends fail instead of running. */
  forget(sequence: DecoderSequence): void {
    const gone = disposedWhileQueued();
    for (const w of [...this.steps, ...this.prefills]) if (w.sequence === sequence) w.reject(gone);
    this.steps = this.steps.filter((w) => w.sequence !== sequence);
    this.prefills = this.prefills.filter((w) => w.sequence !== sequence);
    this.lastPass.delete(sequence);
    this.kept.forget(sequence);
  }

  /** Alternates decode passes and prefill pieces until nothing waits. */
  private async drain(): Promise<void> {
    try {
      while (this.steps.length > 0 || this.prefills.length > 0) {
        if (this.steps.length > 0) await this.decodePass();
        if (this.prefills.length > 0) await this.prefillPiece();
      }
    } finally {
      this.running = false;
    }
  }

  private async decodePass(): Promise<void> {
    await this.gather();
    // Each sequence in the row of the kept batch buffers that already holds it, where it can be.
    const steps = this.kept.arrange(this.steps.splice(0, this.maxBatch));
    if (steps.length === 0) return; // all of them were disposed while it waited
    this.lastPass = new Set(steps.map((s) => s.sequence));
    // The body runs here, not in a method of its own: an extra await would change which steps the next pass finds waiting.
    for (const group of this.passesThatFit(steps)) {
      // A later group waited for the one before: a sequence disposed meanwhile drops out, as forget() drops it from the queue.
      const pass = group.filter((s) => !s.sequence.isDisposed);
      for (const s of group) if (s.sequence.isDisposed) s.reject(disposedWhileQueued());
      if (pass.length === 0) continue;
      this.stats.passes++;
      this.stats.rows += pass.length;
      this.stats.sizes[pass.length] = (this.stats.sizes[pass.length] ?? 0) + 1;
      try {
        // A pass of one runs as a lone step: the same computation as without the batcher.
        const results = pass.length === 1 ? [await pass[0]!.sequence.appendAlone(pass[0]!.tokens)] : await runBatchedPass(this.model, pass, this.kept);
        pass.forEach((s, i) => s.resolve({ batchSize: pass.length, ...results[i]! }));
      } catch (e) {
        const error = e instanceof AppError ? e : new AppError('INTERNAL', `batched decode step failed: ${errorMessage(e)}`, { cause: e });
        for (const s of pass) s.reject(error);
      }
    }
    this.lastDecodeAt = this.now();
  }

  /**
   * `steps` as one pass, or, in the plain layout, in groups whose batch buffers fit the model's KV pool
   * (batched-step.ts, plainPassPoolBytes): past that, every pass would copy each row's cache into fresh
   * memory and back out, and page faults cost more than batching saves. At the Qwen2.5-0.5B shape, q4,
   * 2 cores, four rows at 512 cached positions ran 0.36–0.45× the speed of four lone steps that way, at
   * 128 positions 0.70× before the batch buffers came from the pool and 1.47× since. The fused layout keeps
   * its batch buffers from pass to pass (kept-batch.ts) and runs every pass whole.
   */
  private passesThatFit(steps: DecodeStep[]): DecodeStep[][] {
    if (this.model.io.layout !== 'plain') return [steps];
    const passes: DecodeStep[][] = [];
    for (const step of steps) {
      const last = passes.at(-1);
      const rows = [...(last ?? []), step];
      const bytes = plainPassPoolBytes(this.model, rows.map((s) => s.sequence.length), rows.map((s) => s.tokens.length));
      if (last && bytes <= this.model.kvPool.maxBytes) last.push(step);
      else passes.push([step]);
    }
    return passes;
  }

  /** Waits (a few event-loop turns, at most `gatherMs`) for the last pass's sequences that will step again. */
  private async gather(): Promise<void> {
    const until = performance.now() + this.gatherMs;
    const coming = () => {
      const queued = new Set([...this.steps, ...this.prefills].map((w) => w.sequence));
      return [...this.lastPass].some((s) => !queued.has(s));
    };
    while (this.steps.length < this.maxBatch && coming() && performance.now() < until) await nextTurn();
  }

  private async prefillPiece(): Promise<void> {
    const together = this.firstPrompts();
    if (together.length > 1) return this.firstPromptsPass(together);
    const job = this.prefills[0]!;
    const quiet = this.steps.length === 0 && this.now() - this.lastDecodeAt >= this.quietMs;
    const piece = job.tokens.slice(job.done, job.done + (quiet ? this.quietPrefillChunk : this.prefillChunk));
    try {
      // Room for the whole append before its first piece, so the fused buffers do not grow piece after piece.
      if (job.done === 0) job.sequence.reserve(job.sequence.length + job.tokens.length);
      const result = await job.sequence.appendAlone(piece);
      job.done += piece.length;
      if (job.done < job.tokens.length) return;
      this.finish(job);
      job.resolve({ ...result, batchSize: 1 });
    } catch (e) {
      this.finish(job);
      job.reject(e);
    }
  }

  /**
   * Waiting prompts of empty sequences, none of their tokens fed yet, shortest first: as many as one pass of
   * the shortest's length takes within `prefillChunk` tokens. The shortest is fed whole, so the shared pass
   * and the remainders after it never take more passes than the prompts alone would.
   */
  private firstPrompts(): Prefill[] {
    const fresh = this.prefills.filter((p) => p.done === 0 && p.sequence.length === 0).sort((a, b) => a.tokens.length - b.tokens.length);
    if (fresh.length < 2) return [];
    return fresh.slice(0, Math.min(this.maxBatch, Math.floor(this.prefillChunk / fresh[0]!.tokens.length)));
  }

  /** Feeds `jobs` (shortest first) the shortest's tokens each in one pass; the longer ones go on alone. */
  private async firstPromptsPass(jobs: Prefill[]): Promise<void> {
    const n = jobs[0]!.tokens.length;
    this.stats.promptsTogether += jobs.length;
    try {
      for (const job of jobs) job.sequence.reserve(job.tokens.length);
      // Not into the kept batch buffers: their rows hold the sequences decoding now.
      const results = await runBatchedPass(this.model, jobs.map((j) => ({ sequence: j.sequence, tokens: j.tokens.slice(0, n) })));
      jobs.forEach((job, i) => {
        job.done = n;
        if (n < job.tokens.length) return;
        this.finish(job);
        job.resolve(results[i]!);
      });
    } catch (e) {
      for (const job of jobs) {
        this.finish(job);
        job.reject(e);
      }
    }
  }

  /** Removes `job` by identity: `forget` may have dropped it while its piece ran. */
  private finish(job: Prefill): void {
    this.prefills = this.prefills.filter((p) => p !== job);
  }
}
