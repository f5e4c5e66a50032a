/**
 * Continuous batching for one model session (the edge's engine and the shim's embedded backend each make
 * theirs): generations append to their sequences as always, and the scheduler owns the rows, queuing each
 * append and running the passes its policy decides (decode-policy.ts), shared by several sequences where
 * the policy puts them together (batched-step.ts), each row with its own length. Sequences join at their
 * next append and leave when they stop appending; checkpoints, rollbacks and disposal stay per sequence.
 *
 * The runner only carries decisions out: it decides again after each pass, and on the turn after an
 * append or a disposal while it waits; a wait ends at its deadline on the injected clock.
 *
 * @example
 * const scheduler = DecodeScheduler.over(model, { maxBatch: 8 });
 * const [a, b] = [scheduler.newSequence(), scheduler.newSequence()];
 * await Promise.all([a.append([1]), b.append([1])]); // one forward pass of two rows
 */
import { readFileSync } from 'node:fs';
import { runBatchedPass } from '../batched-step.ts';
import type { DecoderModel } from '../decoder-model.ts';
import type { DecoderSequence } from '../decoder-sequence.ts';
import type { AppendResult } from '../decoder-types.ts';
import { AppError, errorMessage } from '../../errors.ts';
import { KeptBatch } from '../kept-batch.ts';
import type { Logger } from '../../process/logger.ts';
import {
  DEFAULT_GATHER_MS,
  DEFAULT_PREFILL_CHUNK,
  DEFAULT_QUIET_MS,
  DEFAULT_QUIET_PREFILL_CHUNK,
  decideNextPass,
  joinsDecodePass,
  type Decision,
  type SchedulerQueue,
  type SchedulerSettings,
} from './decode-policy.ts';
import { ScheduledSequence } from './scheduled-sequence.ts';

export interface SchedulerOptions {
  /** Most sequences in one decode pass; 1 runs every step alone (no scheduler). */
  maxBatch: number;
  /** Most tokens of a multi-token append run in one pass; DEFAULT_PREFILL_CHUNK when omitted. */
  prefillChunk?: number;
  /** How long a decode pass waits for the sequences of the previous one; DEFAULT_GATHER_MS when omitted. */
  gatherMs?: number;
  /** Most tokens of an append into a cache that joins a decode pass, plain layout only; 1 (decode steps only) when omitted. */
  appendTokens?: number;
  /** How long after the last decode pass prefills still go in pieces of `prefillChunk`; DEFAULT_QUIET_MS when omitted. */
  quietMs?: number;
  /** Most tokens of a prefill piece once nobody has decoded for `quietMs`; DEFAULT_QUIET_PREFILL_CHUNK when omitted. */
  quietPrefillChunk?: number;
  /** The clock of `gatherMs` and `quietMs`, in milliseconds; performance.now when omitted (tests pass their own, which must move for a wait to end). */
  now?: () => number;
}

/**
 * Decode passes and their rows, for metrics: `sizes[n]` counts passes of n rows; `promptsTogether`: first
 * prompts fed in a shared pass; `keptBuffersReused`: batched passes that fed the kept batch buffers
 * instead of gathering every row's cache (kept-batch.ts), `keptRowsCopied` the rows they copied in.
 */
export interface SchedulerStats {
  passes: number;
  rows: number;
  sizes: number[];
  promptsTogether: number;
  keptBuffersReused: number;
  keptRowsCopied: number;
}

interface Waiting {
  sequence: DecoderSequence;
  tokens: readonly number[];
  resolve: (result: AppendResult) => void;
  reject: (error: unknown) => void;
}
interface Prefill extends Waiting {
  done: number;
}

const disposedWhileQueued = () => new AppError('FAILED_PRECONDITION', 'sequence disposed while its append was queued');

export class DecodeScheduler {
  readonly stats: SchedulerStats = { passes: 0, rows: 0, sizes: [], promptsTogether: 0, keptBuffersReused: 0, keptRowsCopied: 0 };
  readonly settings: Readonly<SchedulerSettings>;
  private readonly now: () => number;
  private steps: Waiting[] = [];
  private prefills: Prefill[] = [];
  private lastPass = new Set<DecoderSequence>();
  private lastDecodeAt = -Infinity;
  private turn: 'decode' | 'prefill' = 'decode';
  private turnStartedAt = 0;
  private running = false;
  /** Ends the runner's current wait; set only while it waits. */
  private wake: (() => void) | undefined;
  /** The fused layout's batch buffers, kept from pass to pass with a row per sequence; it counts into `stats`. */
  private readonly kept = new KeptBatch<DecoderSequence>(this.stats);

  private constructor(
    readonly model: DecoderModel,
    options: SchedulerOptions,
  ) {
    const { layout, kvPool } = model;
    this.settings = {
      maxBatch: options.maxBatch,
      prefillChunk: options.prefillChunk ?? DEFAULT_PREFILL_CHUNK,
      gatherMs: options.gatherMs ?? DEFAULT_GATHER_MS,
      appendTokens: layout.raggedRows ? (options.appendTokens ?? 1) : 1,
      quietMs: options.quietMs ?? DEFAULT_QUIET_MS,
      quietPrefillChunk: options.quietPrefillChunk ?? DEFAULT_QUIET_PREFILL_CHUNK,
      passBytes: layout.passBytes,
      poolBytes: kvPool.maxBytes,
    };
    this.now = options.now ?? (() => performance.now());
  }

  get maxBatch(): number {
    return this.settings.maxBatch;
  }

  get appendTokens(): number {
    return this.settings.appendTokens;
  }

  /** Why `model`'s export cannot run a batch that gives each row what it gives alone; undefined when it can. */
  static refusal(model: DecoderModel): string | undefined {
    // The op's name in the graph file (weights kept outside it are not read). Its one scale per tensor
    // would be shared by every row of a batch: a row's rounding would depend on its batch mates.
    if (readFileSync(model.pack.modelPath).includes('DynamicQuantizeLinear'))
      return 'the export quantizes activations with one scale per tensor (DynamicQuantizeLinear), which would mix the rows of a batch';
    return model.layout.exportRefusal();
  }

  /** A scheduler for `model`, or undefined when `maxBatch` is 1 or the export cannot take a batch (logged). */
  static over(model: DecoderModel, options: SchedulerOptions, log?: Logger): DecodeScheduler | undefined {
    for (const [name, value] of Object.entries(options)) {
      if (name === 'now') continue;
      const least = name === 'gatherMs' || name === 'quietMs' ? 0 : 1;
      if (value !== undefined && (!Number.isInteger(value) || value < least))
        throw new AppError('INVALID_ARGUMENT', `batching.${name} must be a whole number ≥ ${least}, got ${value}`);
    }
    if (options.maxBatch <= 1) return undefined;
    const refusal = DecodeScheduler.refusal(model);
    if (refusal) {
      log?.warn(`${model.pack.dir}: decode steps run one sequence at a time: ${refusal}`);
      return undefined;
    }
    return new DecodeScheduler(model, options);
  }

  /** `sequence` with its appends run by this scheduler; disposing the result disposes `sequence`. */
  sequence(sequence: DecoderSequence): ScheduledSequence {
    return new ScheduledSequence(sequence, this);
  }

  /** A new sequence of the model, its appends run by this scheduler. */
  newSequence(): ScheduledSequence {
    return this.sequence(this.model.newSequence());
  }

  /** Queues `tokens` (already checked by the sequence) for `sequence`; resolves as its append. */
  append(sequence: DecoderSequence, tokens: readonly number[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      if (joinsDecodePass(tokens.length, sequence.length, this.settings)) this.steps.push({ sequence, tokens, resolve, reject });
      else this.prefills.push({ sequence, tokens, done: 0, resolve, reject });
      this.nudge();
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
    this.wakeOnNextTurn();
  }

  /** An append arrived: the runner starts, or decides again if it waits, on the next turn (appends made together are seen together). */
  private nudge(): void {
    if (this.running) return this.wakeOnNextTurn();
    this.running = true;
    setImmediate(() => void this.run());
  }

  private wakeOnNextTurn(): void {
    const wake = this.wake;
    this.wake = undefined;
    if (wake) setImmediate(wake);
  }

  /** Carries out the policy's decisions until nothing waits. */
  private async run(): Promise<void> {
    this.turn = 'decode';
    this.turnStartedAt = this.now();
    try {
      for (;;) {
        const queue: SchedulerQueue<Waiting, Prefill> = {
          steps: this.steps,
          prefills: this.prefills,
          lastPass: this.lastPass,
          keptRows: this.kept.heldRows,
          turn: this.turn,
          turnStartedAt: this.turnStartedAt,
          lastDecodeAt: this.lastDecodeAt,
        };
        const decision: Decision<Waiting, Prefill> = decideNextPass(queue, this.now(), this.settings);
        if (decision.kind === 'idle') return;
        if (decision.kind === 'wait') {
          await this.waitUntil(decision.untilMs);
          continue;
        }
        if (decision.kind === 'decode') await this.decode(decision.passes);
        else if (decision.kind === 'prefill') await this.prefillPiece(decision.job, decision.tokens);
        else await this.promptsTogether(decision.jobs, decision.tokens);
        this.turn = decision.kind === 'decode' ? 'prefill' : 'decode';
        this.turnStartedAt = this.now();
      }
    } finally {
      this.running = false;
    }
  }

  private waitUntil(untilMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wake?.(), Math.max(0, untilMs - this.now()));
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  private async decode(passes: Waiting[][]): Promise<void> {
    const taken = new Set(passes.flat());
    this.steps = this.steps.filter((s) => !taken.has(s));
    this.lastPass = new Set([...taken].map((s) => s.sequence));
    for (const group of passes) {
      // A later pass waited for the one before: a sequence disposed meanwhile drops out, as forget() drops it from the queue.
      const pass = group.filter((s) => !s.sequence.isDisposed);
      for (const s of group) if (s.sequence.isDisposed) s.reject(disposedWhileQueued());
      if (pass.length === 0) continue;
      this.stats.passes++;
      this.stats.rows += pass.length;
      this.stats.sizes[pass.length] = (this.stats.sizes[pass.length] ?? 0) + 1;
      try {
        // A pass of one runs as a lone append: the same computation as without a scheduler.
        const results = pass.length === 1 ? [await pass[0]!.sequence.feed(pass[0]!.tokens)] : await runBatchedPass(this.model, pass, this.kept);
        pass.forEach((s, i) => s.resolve({ batchSize: pass.length, ...results[i]! }));
      } catch (e) {
        const error = e instanceof AppError ? e : new AppError('INTERNAL', `batched decode step failed: ${errorMessage(e)}`, { cause: e });
        for (const s of pass) s.reject(error);
      }
    }
    this.lastDecodeAt = this.now();
  }

  private async prefillPiece(job: Prefill, count: number): Promise<void> {
    try {
      // Room for the whole append before its first piece, so the fused buffers do not grow piece after piece.
      if (job.done === 0) job.sequence.reserve(job.sequence.length + job.tokens.length);
      const result = await job.sequence.feed(job.tokens.slice(job.done, job.done + count));
      job.done += count;
      if (job.done < job.tokens.length) return;
      this.finish(job);
      job.resolve({ ...result, batchSize: 1 });
    } catch (e) {
      this.finish(job);
      job.reject(e);
    }
  }

  /** Feeds `jobs` (shortest first) their first `n` tokens in one pass; the longer ones go on alone. Not into the kept batch buffers: their rows hold the sequences decoding now. */
  private async promptsTogether(jobs: Prefill[], n: number): Promise<void> {
    this.stats.promptsTogether += jobs.length;
    try {
      for (const job of jobs) job.sequence.reserve(job.tokens.length);
      const results = await runBatchedPass(
        this.model,
        jobs.map((j) => ({ sequence: j.sequence, tokens: j.tokens.slice(0, n) })),
      );
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
