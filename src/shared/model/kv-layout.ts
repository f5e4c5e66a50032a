/**
 * The two ways a decoder export holds its KV cache, each one object (decoder-io.ts says which an export
 * has): kv-plain-layout.ts, where `present.*` comes back a position longer and is fed back, and
 * kv-fused-layout.ts, where preallocated buffers are written in place (onnxruntime's
 * GroupQueryAttention). A sequence (decoder-sequence.ts) and a batched pass (batched-step.ts) do what
 * both layouts share and ask the layout for the rest: a new cache, room for more positions, a restore,
 * the feeds and fetches of a lone pass, a batch's gather and scatter, and letting go of a tensor.
 *
 * @example
 * const cache = model.layout.emptyCache();
 * const { out, cache: next } = await model.layout.runAlone(cache, 0, 3, feeds); // next: plain only
 */
import type { DecoderIo } from './decoder-io.ts';
import type { DecoderStats } from './decoder-types.ts';
import type { KeptBatch } from './kept-batch.ts';
import type { KvBufferPool } from './kv-buffer-pool.ts';
import type { KvSnapshot } from './kv-snapshot.ts';
import type { ModelPack } from './model-pack.ts';
import type { OrtTensor } from './ort.ts';

/** A sequence's cache tensors by `past_key_values.*` name. */
export type KvCache = Record<string, OrtTensor>;

export type Fetches = Record<string, OrtTensor | null>;

/** What a layout reads of its model (DecoderModel). */
export interface KvModel {
  readonly pack: ModelPack;
  readonly io: DecoderIo;
  /** The cache's last axis: the config's head_dim, or a fused graph's padded head size. */
  readonly cacheHeadDim: number;
  readonly kvBytesPerPosition: number;
  readonly hasHiddenStates: boolean;
  readonly kvPool: KvBufferPool;
  readonly stats: DecoderStats;
  /** One forward pass; `fetches` as in runSession. */
  forward(feeds: Record<string, OrtTensor>, tokens: number, fetches?: Fetches): Promise<Record<string, OrtTensor>>;
}

/** A model with its layout: what a sequence and a batched pass run on. */
export interface LaidOutModel extends KvModel {
  readonly layout: KvLayout;
}

/** A sequence as a batched pass reads and writes its cache (DecoderSequence). */
export interface KvRow {
  readonly cache: Readonly<KvCache>;
  readonly length: number;
  readonly revision: number;
  /** A row disposed while its pass ran keeps nothing of it. */
  readonly isDisposed: boolean;
  /** Makes the cache hold `total` positions (the fused layout's buffers grow). */
  fit(total: number): void;
}

/** A batched pass's shape: each row's cache length and new tokens, the most of each, and the positions fed in all. */
export interface BatchShape {
  lengths: readonly number[];
  counts: readonly number[];
  /** New positions per row in the pass (the longest row's tokens). */
  n: number;
  longest: number;
  total: number;
}

export interface KvLayout {
  readonly name: 'plain' | 'fused';
  /**
   * Whether rows of one pass may feed different numbers of tokens into their caches (appends of a few
   * tokens sharing decode passes, `appendTokens`): each row padded before its own tokens.
   */
  readonly raggedRows: boolean;
  /**
   * Bytes of the model's pool a batched pass over caches of `lengths`, fed `counts` tokens each, writes
   * into; absent where the batch buffers are kept from pass to pass instead (every pass runs whole).
   */
  readonly passBytes?: (lengths: readonly number[], counts: readonly number[]) => number;
  /** Why the export cannot run a batch that gives each row what it gives alone; undefined when it can. */
  exportRefusal(): string | undefined;
  /** Why these rows cannot share one pass; undefined when they can. */
  rowsRefusal(counts: readonly number[], lengths: readonly number[]): string | undefined;
  /** The cache of a new, empty sequence. */
  emptyCache(): KvCache;
  /** A cache holding the first `length` positions of `cache` with room for `total`; undefined when `cache` has room. */
  grown(cache: Readonly<KvCache>, length: number, total: number): KvCache | undefined;
  /** The cache a sequence starts from: the first `length` positions of `snapshot`, with room for `reserve`. */
  restored(snapshot: KvSnapshot, length: number, reserve: number): KvCache;
  /** Lets go of a cache tensor nothing holds any more (back to the pool where it came from there). */
  drop(tensor: OrtTensor): void;
  /**
   * One sequence's forward pass of `n` tokens: `feeds` (ids, mask, positions) plus the cache of `start`
   * positions; the outputs, and the cache that replaces the old one where the pass returns a new one.
   */
  runAlone(cache: Readonly<KvCache>, start: number, n: number, feeds: Record<string, OrtTensor>): Promise<{ out: Record<string, OrtTensor>; cache?: KvCache }>;
  /**
   * A batched pass: the rows' caches gathered into `feeds`, the pass run, each row's new positions
   * scattered back (or each row's new cache handed to `collect`, which records the results); the batch
   * buffers then go back to the pool, or stay in `kept` for the next pass.
   */
  runBatch<T>(
    rows: readonly KvRow[],
    shape: BatchShape,
    feeds: Record<string, OrtTensor>,
    kept: KeptBatch<KvRow> | undefined,
    collect: (out: Record<string, OrtTensor>, present?: KvCache[]) => T,
  ): Promise<T>;
}

/**
 * Batch buffers grow in steps of this many positions, so one size serves 32 passes in a row from the pool
 * (and a fused graph without new_key_values.*, whose buffers onnxruntime-node copies out after each
 * pass, copies at most 31 positions more than the longest row holds).
 */
const BATCH_CAPACITY_STEP = 32;

/** Room for `positions` in whole BATCH_CAPACITY_STEPs (one at least). */
export function batchCapacity(positions: number): number {
  return Math.max(1, Math.ceil(positions / BATCH_CAPACITY_STEP)) * BATCH_CAPACITY_STEP;
}
