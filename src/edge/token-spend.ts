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

interface Entry {
  at: number;
  tokens: number;
  cloud: number;
}

export class TokenSpend {
  private entries: Entry[] = [];
  private readonly startedAt: number;

  constructor(private readonly now: () => number) {
    this.startedAt = now();
  }

  /** `tokens` emitted now, `cloud` of them returned by the cloud. */
  emitted(tokens: number, cloud: number): void {
    this.entries.push({ at: this.now(), tokens, cloud });
  }

  cloudTokensLastMinute(): number {
    return this.recent().reduce((sum, e) => sum + e.cloud, 0);
  }

  /** The box's tokens per minute (all sources), over the last minute or since the box started if sooner. */
  tokensPerMinute(): number {
    const tokens = this.recent().reduce((sum, e) => sum + e.tokens, 0);
    const span = Math.max(MIN_RATE_SPAN_MS, Math.min(MINUTE_MS, this.now() - this.startedAt));
    return (tokens * MINUTE_MS) / span;
  }

  private recent(): Entry[] {
    const since = this.now() - MINUTE_MS;
    let drop = 0;
    while (drop < this.entries.length && this.entries[drop]!.at <= since) drop++;
    if (drop > 0) this.entries = this.entries.slice(drop);
    return this.entries;
  }
}
