/**
 * A decoder sequence's KV cache, kept after the sequence is gone so a later sequence whose ids start the
 * same way can begin from it (the prefix cache, prefix-cache.ts).
 *
 * Taking one copies nothing where it can: a sequence never rewrites the positions it already holds (it
 * appends after them; a rollback returns to a checkpoint taken later; a growth moves it to new buffers),
 * so the snapshot holds the sequence's own arrays under tensors of its own (the sequence's tensors are
 * disposed when it moves on). The plain layout's tensors are exactly the cache, `[1, kv_heads, length,
 * head_dim]`. The fused layout's buffers hold `capacity` positions of which the first `length` are the
 * cache: shared while at most half of them is free, copied compact otherwise, so a short prompt in a
 * fresh buffer does not hold a whole buffer's bytes of the cache's bound (a plain-layout cache written by a
 * batched pass is likewise the first part of a larger pooled buffer). At 1,000 tokens of the Qwen2.5-0.5B
 * shape the copy it saves is 25 MB, written into fresh pages before the first token. Restoring is the layout's
 * (kv-layout.ts): a plain cache restored whole shares the snapshot's memory, a fused one is copied.
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
import { AppError } from '../errors.ts';
import { feedable } from './float-tensors.ts';
import { ort, type OrtTensor } from './ort.ts';

export interface KvSnapshot {
  /** The ids the cache holds, oldest first. */
  readonly tokens: readonly number[];
  /** Per `past_key_values.*` name, `[1, kv_heads, capacity ≥ tokens.length, head_dim]` in the cache's element type: the first `tokens.length` positions are the cache. */
  readonly kv: Readonly<Record<string, OrtTensor>>;
  /** `hidden_states` of the last position; empty when the pack has no such output. */
  readonly lastHidden: Float32Array;
  /** Bytes held: the KV tensors (their whole capacity) and the hidden state. */
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

/** A snapshot of `tokens.length` positions of `past` (fused buffers or plain tensors) ending at `tokens`: shared or copied, see above. */
export function takeKvSnapshot(past: Readonly<Record<string, OrtTensor>>, tokens: readonly number[], lastHidden: Float32Array): KvSnapshot {
  const kv: Record<string, OrtTensor> = {};
  let bytes = lastHidden.byteLength;
  for (const [name, tensor] of Object.entries(past)) {
    kv[name] = sharesWell(tensor, tokens.length) ? sharedKvTensor(tensor) : copyKvPositions(tensor, tokens.length);
    // A shared tensor holds its whole memory, which may be larger than the tensor (see sharesWell).
    bytes += (kv[name].data as CacheData).buffer.byteLength;
  }
  return { tokens: [...tokens], kv, lastHidden: lastHidden.slice(), bytes };
}

/**
 * Whether the memory under a cache tensor holding `length` positions has at most as many bytes free as used:
 * a fused buffer's free capacity, or the rest of a pooled buffer a plain-layout batched pass's cache is the
 * first part of (kv-plain-layout.ts).
 */
function sharesWell(tensor: OrtTensor, length: number): boolean {
  const capacity = tensor.dims[2]!;
  if (length > capacity) throw new RangeError(`cannot keep ${length} positions of a cache tensor holding ${capacity}`);
  const data = feedable(tensor).data as CacheData;
  const used = (data.byteLength / capacity) * length;
  return data.buffer.byteLength - used <= used;
}

/** A tensor of its own over the same memory: disposing the sequence's tensor leaves this one readable. */
export function sharedKvTensor(tensor: OrtTensor): OrtTensor {
  return feedable(new ort.Tensor(tensor.type as 'float32' | 'float16', feedable(tensor).data as CacheData, tensor.dims));
}

/** Throws unless a sequence can start from the first `length` positions of `snapshot` (its layout makes the tensors: kv-layout.ts). */
export function checkRestorable(snapshot: KvSnapshot, length: number): void {
  if (!Number.isInteger(length) || length < 0 || length > snapshot.tokens.length) {
    throw new AppError('INVALID_ARGUMENT', `cannot restore ${length} positions of a snapshot holding ${snapshot.tokens.length}`);
  }
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
