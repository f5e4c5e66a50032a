/**
 * A copy of a decoder sequence's KV cache, kept after the sequence is gone so a later sequence whose ids
 * start the same way can begin from it (the prefix cache, prefix-cache.ts). Each cache tensor is copied
 * compact, `[1, kv_heads, length, head_dim]`, in the sequence's own element type, whatever layout it
 * came from: the plain layout's tensors are already that shape; the fused layout's preallocated buffers
 * hold `capacity` positions, of which only the first `length` are the cache.
 *
 * A snapshot also holds the `hidden_states` of its last position: the `previousHidden` of the next
 * append when exactly one token follows (AppendResult's semantics). Restored to fewer positions than it
 * holds, that hidden state is unknown, so the sequence must then be fed at least two tokens, whose
 * forward pass computes it (`restorableLength` keeps to that).
 *
 * @example
 * const snapshot = sequence.snapshot();
 * const next = model.newSequence();
 * next.restore(snapshot, restorableLength(snapshot.tokens.length, matched, ids.length));
 */
import type { DecoderIo } from './decoder-io.ts';
import { AppError } from './errors.ts';
import { feedable } from './float-tensors.ts';
import { growKvBuffers, kvCapacity } from './kv-buffer.ts';
import type { ModelPack } from './model-pack.ts';
import { ort, type OrtTensor } from './ort.ts';

export interface KvSnapshot {
  /** The ids the cache holds, oldest first. */
  readonly tokens: readonly number[];
  /** Per `past_key_values.*` name, `[1, kv_heads, tokens.length, head_dim]` in the cache's element type. */
  readonly kv: Readonly<Record<string, OrtTensor>>;
  /** `hidden_states` of the last position; empty when the pack has no such output. */
  readonly lastHidden: Float32Array;
  /** Bytes held: the KV tensors and the hidden state. */
  readonly bytes: number;
}

type CacheData = Float32Array | Uint16Array;

/** The first `length` positions of a `[1, kv_heads, capacity, head_dim]` tensor, as a new compact tensor of the same type. */
export function copyKvPositions(tensor: OrtTensor, length: number): OrtTensor {
  const [, heads, capacity, headDim] = tensor.dims as [number, number, number, number];
  if (length > capacity) throw new RangeError(`cannot copy ${length} positions of a cache tensor holding ${capacity}`);
  const from = feedable(tensor).data as CacheData;
  const out = from instanceof Float32Array ? new Float32Array(heads * length * headDim) : new Uint16Array(heads * length * headDim);
  for (let h = 0; h < heads; h++) out.set(from.subarray(h * capacity * headDim, (h * capacity + length) * headDim), h * length * headDim);
  return feedable(new ort.Tensor(tensor.type as 'float32' | 'float16', out, [1, heads, length, headDim]));
}

/** A snapshot of `length` positions of `past` (fused buffers or plain tensors) ending at `tokens`. */
export function takeKvSnapshot(past: Readonly<Record<string, OrtTensor>>, tokens: readonly number[], lastHidden: Float32Array): KvSnapshot {
  const kv: Record<string, OrtTensor> = {};
  let bytes = lastHidden.byteLength;
  for (const [name, tensor] of Object.entries(past)) {
    kv[name] = copyKvPositions(tensor, tokens.length);
    bytes += (kv[name].data as CacheData).byteLength;
  }
  return { tokens: [...tokens], kv, lastHidden: lastHidden.slice(), bytes };
}

/**
 * The cache tensors a sequence starts from, holding a copy of the first `length` positions of `snapshot`
 * (the snapshot stays usable): compact tensors for the plain layout, buffers of the capacity the fused
 * layout would have made for `length` positions, their last axis `cacheHeadDim` (DecoderModel.cacheHeadDim: padded heads included).
 */
export function restoredKv(
  snapshot: KvSnapshot,
  length: number,
  io: DecoderIo,
  pack: Pick<ModelPack, 'numKvHeads' | 'maxPositions'>,
  cacheHeadDim: number,
): Record<string, OrtTensor> {
  if (!Number.isInteger(length) || length < 0 || length > snapshot.tokens.length) {
    throw new AppError('INVALID_ARGUMENT', `cannot restore ${length} positions of a snapshot holding ${snapshot.tokens.length}`);
  }
  if (io.layout === 'fused') return growKvBuffers(snapshot.kv, io.pastNames, pack.numKvHeads, cacheHeadDim, kvCapacity(length, 0, pack.maxPositions), length);
  return Object.fromEntries(io.pastNames.map((name) => [name, copyKvPositions(snapshot.kv[name]!, length)]));
}

/**
 * How many positions of a snapshot holding `held` ids, of which the first `matched` equal the new
 * sequence's first ids, a sequence of `total` ids can start from: at least one id is always left to feed
 * (its forward pass gives the logits and hidden state to decide from), and a restore short of the whole
 * snapshot leaves at least two (the hidden state before the first fed id is only known at `held`).
 *
 * @example
 * restorableLength(10, 10, 12); // 10: two ids to feed, the last hidden state known
 * restorableLength(10, 8, 9); // 7: restored to 8 only one id would be fed, with an unknown previous hidden state
 */
export function restorableLength(held: number, matched: number, total: number): number {
  const usable = Math.min(matched, held, total - 1);
  if (usable === held) return usable;
  return Math.max(0, Math.min(usable, total - 2));
}

/** How many leading ids `a` and `b` share. */
export function sharedPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
