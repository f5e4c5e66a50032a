/**
 * The edge's circuit breaker towards the cloud: after a transport failure the next attempts wait an
 * exponentially growing, jittered delay; calls during that delay fail at once (UNAVAILABLE) instead of
 * each routed token waiting on a dead connection. One success closes the circuit.
 *
 * @example
 * const backoff = new CloudBackoff({ initialMs: 250, maxMs: 10_000 });
 * backoff.check();          // throws while open
 * backoff.failure(); backoff.success();
 */
import { AppError } from '../shared/errors.ts';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Random factor applied to each delay, e.g. 0.2 → ±20 %. */
  jitter?: number;
}

export class CloudBackoff {
  private failures = 0;
  private retryAt = 0;

  constructor(
    private readonly options: BackoffOptions,
    private readonly now: () => number = () => performance.now(),
    private readonly random: () => number = Math.random,
  ) {}

  /** True while calls are refused. */
  get open(): boolean {
    return this.failures > 0 && this.now() < this.retryAt;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  /** Throws UNAVAILABLE while the circuit is open. */
  check(): void {
    if (!this.open) return;
    const waitMs = Math.ceil(this.retryAt - this.now());
    throw new AppError('UNAVAILABLE', `cloud unavailable after ${this.failures} failed attempt(s); next attempt in ${waitMs} ms`);
  }

  failure(): void {
    this.failures++;
    const { initialMs, maxMs, jitter = 0.2 } = this.options;
    const delay = Math.min(maxMs, initialMs * 2 ** (this.failures - 1));
    this.retryAt = this.now() + delay * (1 - jitter + 2 * jitter * this.random());
  }

  success(): void {
    this.failures = 0;
    this.retryAt = 0;
  }
}
