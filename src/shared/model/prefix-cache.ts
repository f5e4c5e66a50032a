/**
 * The prompt (prefix) cache shared by the edge and the embedded cloud backend: KV snapshots of earlier
 * sequences, keyed by the ids they hold, so a new sequence whose ids start the same way (a chat's next
 * turn, a kiosk's fixed system prompt, a service resending its context) starts from the longest cached
 * prefix and prefills only the rest.
 *
 * Entries are looked up by comparing ids (a few thousand entries at most within a sensible bound, each
 * compared until its first difference: far below one forward pass). The bytes held (KV tensors and hidden
 * states) never exceed `maxBytes`: the least recently used entries go first, and a snapshot larger than
 * the whole bound is not kept. An entry whose ids start a newer one is dropped (the newer one serves
 * them too), and a sequence whose ids an entry already holds is not copied again.
 *
 * Reuse never changes outputs: a restored cache holds exactly the KV a prefill of those ids computed,
 * and at least one id is always fed (see restorableLength), so the logits and hidden states come from a
 * forward pass as before.
 *
 * A prefix shorter than MIN_RESTORED_TOKENS is not restored. It saves a few positions of a prefill pass
 * whose cost is mostly reading the weights, while the sequence it would fill is no longer empty, and only
 * empty sequences share their first pass with other new prompts (scheduler/decode-policy.ts). Prompts that share
 * only their first ids (a BOS token, a common opening word) are common: restoring them kept every user
 * arriving after the first from sharing a pass.
 *
 * @example
 * const cache = new PrefixCache(model, { maxBytes: 256 * 2 ** 20 });
 * const { sequence, cachedTokens } = cache.newSequence(ids);
 * await sequence.append(ids.slice(cachedTokens));
 * cache.keep(sequence); // after its prefill, and again when it ends
 */
import type { DecoderModel, DecoderSequence } from './decoder-model.ts';
import type { AppendableSequence } from './decoder-types.ts';
import { restorableLength, sharedPrefixLength, type KvSnapshot } from './kv-snapshot.ts';

/** The shortest prefix worth restoring (see the header). */
export const MIN_RESTORED_TOKENS = 8;

export interface PrefixCacheStats {
  /** Bytes held now (KV tensors and hidden states); never above `maxBytes`. */
  bytes: number;
  entries: number;
  /** Ids of every sequence started through the cache, and how many of them were restored instead of fed. */
  lookedUpTokens: number;
  hitTokens: number;
  /** Snapshots kept, and entries dropped to stay within the bound. */
  insertions: number;
  evictions: number;
}

export class PrefixCache {
  /** Entries in order of use, least recently used first (a Set keeps insertion order; a use re-inserts). */
  private readonly entries = new Set<KvSnapshot>();
  private readonly counters = { bytes: 0, lookedUpTokens: 0, hitTokens: 0, insertions: 0, evictions: 0 };

  constructor(
    readonly model: DecoderModel,
    readonly options: { maxBytes: number },
  ) {
    if (!Number.isFinite(options.maxBytes) || options.maxBytes < 0) throw new RangeError(`maxBytes must be a non-negative number, got ${options.maxBytes}`);
  }

  get stats(): PrefixCacheStats {
    return { ...this.counters, entries: this.entries.size };
  }

  /**
   * A new sequence of the model holding the longest cached prefix of `ids` it may start from (at least
   * one id left to feed, at least MIN_RESTORED_TOKENS restored), and how many ids that is: the caller
   * appends `ids.slice(cachedTokens)`, for which a restored sequence already has room.
   */
  newSequence(ids: readonly number[]): { sequence: DecoderSequence; cachedTokens: number } {
    let best: { entry: KvSnapshot; length: number } | undefined;
    for (const entry of this.entries) {
      const length = restorableLength(entry.tokens.length, sharedPrefixLength(entry.tokens, ids), ids.length);
      if (length >= MIN_RESTORED_TOKENS && length >= (best?.length ?? 0)) best = { entry, length };
    }
    const sequence = this.model.newSequence();
    this.counters.lookedUpTokens += ids.length;
    if (!best) return { sequence, cachedTokens: 0 };
    try {
      sequence.restore(best.entry, best.length, ids.length);
    } catch (e) {
      sequence.dispose();
      throw e;
    }
    this.touch(best.entry);
    this.counters.hitTokens += best.length;
    return { sequence, cachedTokens: best.length };
  }

  /**
   * Keeps a copy of `sequence`'s cache (it goes on unchanged), unless an entry already holds its ids;
   * returns whether a snapshot was taken.
   */
  keep(sequence: AppendableSequence): boolean {
    if (this.options.maxBytes === 0 || sequence.length === 0) return false;
    const holder = [...this.entries].find(
      (entry) => entry.tokens.length >= sequence.length && sharedPrefixLength(entry.tokens, sequence.tokens) === sequence.length,
    );
    if (holder) {
      this.touch(holder);
      return false;
    }
    const snapshot = sequence.snapshot();
    return snapshot !== undefined && this.insert(snapshot);
  }

  /** Adds `snapshot`, dropping the entries it extends and the least recently used beyond the bound; false when it alone exceeds the bound. */
  insert(snapshot: KvSnapshot): boolean {
    if (snapshot.bytes > this.options.maxBytes) return false;
    for (const entry of this.entries) {
      if (entry.tokens.length <= snapshot.tokens.length && sharedPrefixLength(entry.tokens, snapshot.tokens) === entry.tokens.length) this.remove(entry);
    }
    for (const oldest of this.entries) {
      if (this.counters.bytes + snapshot.bytes <= this.options.maxBytes) break;
      this.remove(oldest);
      this.counters.evictions++;
    }
    this.entries.add(snapshot);
    this.counters.bytes += snapshot.bytes;
    this.counters.insertions++;
    return true;
  }

  /** Drops every entry. */
  clear(): void {
    for (const entry of this.entries) this.remove(entry);
  }

  private touch(entry: KvSnapshot): void {
    this.entries.delete(entry);
    this.entries.add(entry);
  }

  private remove(entry: KvSnapshot): void {
    if (this.entries.delete(entry)) this.counters.bytes -= entry.bytes;
  }
}
