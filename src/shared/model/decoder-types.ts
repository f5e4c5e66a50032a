/**
 * What loading a decoder takes, what its appends and counters report (decoder-model.ts re-exports them),
 * and what a generation holds of its sequence, whether its appends run alone or through a scheduler.
 */
import type { KvSnapshot } from './kv-snapshot.ts';
import type { Logger } from '../process/logger.ts';
import type { ModelThread } from './model-session.ts';

export interface DecoderLoadOptions {
  /** Threads for one session run; onnxruntime picks when omitted. */
  threads?: number;
  /** onnxruntime execution providers in order of preference (see execution-providers.ts); `['cpu']` when omitted. */
  executionProviders?: readonly string[];
  /** Where a provider fallback is reported, and a worker thread refused (decoder-session.ts). */
  log?: Logger;
  /**
   * Where the forward passes run: `main`, on the JavaScript thread, which they block while they compute; or
   * `worker`, a worker thread of the model's own (worker-session.ts), so that timers, sockets and requests
   * are served meanwhile, at the cost of copying the feeds across. `main` when omitted.
   */
  thread?: ModelThread;
  /**
   * Turns on onnxruntime's profiler: every run's kernels are timed and written, when `endProfiling` is
   * called, to a JSON file whose name starts with this prefix (onnxruntime appends the date and time).
   */
  profileFilePrefix?: string;
  /**
   * Bytes of released KV buffers kept for reuse (kv-buffer-pool.ts); when omitted DEFAULT_KV_POOL_BYTES,
   * or less for a model whose full-context caches are small (decoder-model.ts).
   * It also bounds a plain-layout batched pass: rows past it run in a pass of their own (scheduler/decode-policy.ts).
   */
  kvPoolBytes?: number;
}

export interface AppendResult {
  /** Logits of the last appended position, `[vocab]`. */
  logits: Float32Array;
  /** `hidden_states` of the last appended position, `[hidden]`; empty when the pack has no such output. */
  hidden: Float32Array;
  /**
   * `hidden_states` of the position before it (the second-to-last appended, or the cache's last before
   * this append); zeros at the sequence's first position, empty when the pack has no such output.
   */
  previousHidden: Float32Array;
  /** Per-position logits `[n, vocab]` and hidden states `[n, hidden]`, only with `allPositions`. */
  allLogits?: Float32Array;
  allHidden?: Float32Array;
  /** Sequences in the forward pass that produced it: 1 when it ran alone, more when batched. */
  batchSize?: number;
}

/** Counters that let tests and benchmarks prove how much work the model did. */
export interface DecoderStats {
  runs: number;
  tokensFed: number;
  /** Sequences created and not yet disposed: each holds a KV cache. */
  liveSequences: number;
  /** KV-cache bytes copied by the fused layout's buffers when they grew (checkpoints and rollbacks copy none). */
  kvBytesCopied: number;
  /** Bytes of the outputs onnxruntime-node returned, each copied into a new JavaScript buffer (KV cache included). */
  outputBytes: number;
  /**
   * Milliseconds inside onnxruntime's run (kernels, and the binding's copies of the outputs), from the moment
   * each run starts: runs asked for together queue, and a run's wait behind the others is not counted.
   */
  runMs: number;
}

/**
 * A sequence as a generation uses it: a DecoderSequence, whose appends each run as one forward pass of
 * their own, or a ScheduledSequence over one, whose appends its scheduler runs, shared with others'
 * (scheduler/decode-scheduler.ts). Either way each append resolves with the outputs of its last position.
 *
 * @example
 * const sequence: AppendableSequence = scheduler ? scheduler.sequence(model.newSequence()) : model.newSequence();
 * const { logits } = await sequence.append(promptIds);
 */
export interface AppendableSequence {
  /** Tokens in the KV cache. */
  readonly length: number;
  /** The token ids the cache holds, oldest first. */
  readonly tokens: readonly number[];
  /** How many checkpoints are held. */
  readonly checkpoints: number;
  append(tokens: readonly number[], options?: { allPositions?: boolean }): Promise<AppendResult>;
  checkpoint(): void;
  rollback(): void;
  commit(): void;
  /** A copy of the cache for the prefix cache (kv-snapshot.ts); undefined when there is nothing to keep. */
  snapshot(): KvSnapshot | undefined;
  dispose(): void;
}
