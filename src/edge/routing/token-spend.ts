/**
 * The edge box's cloud spending over the last minute, for a token budget ("at most 20,000 cloud tokens an
 * hour per box" is 333 a minute): the cloud tokens routed steps returned, and all tokens the box emitted,
 * each as timed entries dropped once a minute old. The budget is a hard cap on the first (a step asks for no
 * more than is left); the second turns the rate into a share, so the cut spreads the budget over the box's
 * tokens instead of spending it on the first positions of the minute. Clock injected, so tests are exact.
 *
 * @example
 * const spend = new TokenSpend(() => performance.now());
 * spend.emitted(10, 3); // 10 tokens emitted, 3 of them from the cloud
 * spend.cloudTokensLastMinute(); // 3
 */

export const MINUTE_MS = 60_000;
/** The rate is read over at least this long, so the first tokens after a quiet spell do not read as a huge rate. */
const MIN_RATE_SPAN_MS = 5_000;

/**
 * Tokens emitted within this long of an entry's first join it: a busy box (many users, thousands of tokens a
 * second) then holds about 600 entries a minute however fast it goes. An entry is dropped once its newest
 * token is a minute old, so its older ones count for up to this long more: the budget errs towards spending less.
 */
const ENTRY_SPAN_MS = 100;

interface Entry {
  /** When its first token was emitted. */
  first: number;
  /** When its newest token was emitted. */
  at: number;
  tokens: number;
  cloud: number;
}

export class TokenSpend {
  /** Entries from `head` on are the last minute's (or newer than the last prune); those before are dropped. */
  private entries: Entry[] = [];
  private head = 0;
  private readonly startedAt: number;

  constructor(private readonly now: () => number) {
    this.startedAt = now();
  }

  /** `tokens` emitted now, `cloud` of them returned by the cloud. */
  emitted(tokens: number, cloud: number): void {
    // Every token of every generation comes through here, budget or not, and nothing may read the spend
    // (no token budget, no Prometheus scrape): dropping old entries here, and joining tokens close in time
    // into one entry, keeps a box that runs for weeks at a minute of entries, about 600, at any token rate.
    this.prune();
    const now = this.now();
    const last = this.entries.length > this.head ? this.entries[this.entries.length - 1]! : undefined;
    if (last && now - last.first < ENTRY_SPAN_MS) {
      last.at = now;
      last.tokens += tokens;
      last.cloud += cloud;
    } else this.entries.push({ first: now, at: now, tokens, cloud });
  }

  cloudTokensLastMinute(): number {
    return this.lastMinute('cloud');
  }

  /** The box's tokens per minute (all sources), over the last minute or since the box started if sooner. */
  tokensPerMinute(): number {
    const tokens = this.lastMinute('tokens');
    const span = Math.max(MIN_RATE_SPAN_MS, Math.min(MINUTE_MS, this.now() - this.startedAt));
    return (tokens * MINUTE_MS) / span;
  }

  /** Entries held: at most the last minute's, plus as many dropped ones not yet compacted away. */
  get heldEntries(): number {
    return this.entries.length;
  }

  /** The sum of one count over the last minute's entries. */
  private lastMinute(count: 'tokens' | 'cloud'): number {
    this.prune();
    let sum = 0;
    for (let i = this.head; i < this.entries.length; i++) sum += this.entries[i]![count];
    return sum;
  }

  /** Drops entries a minute old; compacts once the dropped ones are half the array (amortized O(1) an entry). */
  private prune(): void {
    const since = this.now() - MINUTE_MS;
    while (this.head < this.entries.length && this.entries[this.head]!.at <= since) this.head++;
    if (this.head > 0 && this.head * 2 >= this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}
