/**
 * A DecoderSequence whose appends its scheduler runs (decode-scheduler.ts), in passes it may share with
 * other sequences; everything else (checkpoints, snapshots, disposal) is the sequence's own. Disposing it
 * tells the scheduler, which drops what the sequence still had queued.
 *
 * @example
 * const sequence = scheduler.sequence(prefixCache.newSequence(ids).sequence);
 * const { logits } = await sequence.append(ids.slice(cachedTokens));
 */
import type { DecoderSequence } from '../decoder-sequence.ts';
import type { AppendableSequence, AppendResult } from '../decoder-types.ts';
import type { KvSnapshot } from '../kv-snapshot.ts';

/** What a ScheduledSequence needs of its scheduler. */
export interface AppendQueue {
  append(sequence: DecoderSequence, tokens: readonly number[]): Promise<AppendResult>;
  forget(sequence: DecoderSequence): void;
}

export class ScheduledSequence implements AppendableSequence {
  constructor(
    /** The KV cache the appends grow. */
    readonly kv: DecoderSequence,
    private readonly queue: AppendQueue,
  ) {}

  get length(): number {
    return this.kv.length;
  }

  get tokens(): readonly number[] {
    return this.kv.tokens;
  }

  get checkpoints(): number {
    return this.kv.checkpoints;
  }

  /** Queues `tokens` with the scheduler once they pass the sequence's checks; `allPositions` (a scoring pass) runs alone. */
  async append(tokens: readonly number[], options: { allPositions?: boolean } = {}): Promise<AppendResult> {
    if (options.allPositions) return this.kv.append(tokens, options);
    this.kv.checkAppend(tokens);
    return this.queue.append(this.kv, tokens);
  }

  checkpoint(): void {
    this.kv.checkpoint();
  }

  rollback(): void {
    this.kv.rollback();
  }

  commit(): void {
    this.kv.commit();
  }

  snapshot(): KvSnapshot | undefined {
    return this.kv.snapshot();
  }

  dispose(): void {
    this.kv.dispose();
    this.queue.forget(this.kv);
  }
}
