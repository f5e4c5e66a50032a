/**
 * The edge's circuit breaker towards the cloud. Closed, every routed step goes to the shim. After
 * `failureThreshold` transport failures in a row (a missed deadline counts as all of them) it opens: for an
 * exponentially growing, jittered delay every new stream is refused at once with UNAVAILABLE, so routed
 * tokens fall back to the edge model instead of each waiting on a dead or slow shim. When the delay has
 * passed it is half-open: one caller is let through as a probe while the others are still refused; the
 * probe's success closes the circuit, its failure opens it again for twice as long (up to `maxMs`).
 *
 * Why a missed deadline opens the circuit at once: an unreachable shim fails in milliseconds (connection
 * refused), so tolerating a few such failures before giving up costs nothing and rides out a blip such as
 * a shim restart; a shim that is slow past the deadline costs a whole deadline of stalled output per
 * attempt, and a user watching the page would rather see the edge's own tokens than wait that long again.
 *
 * A failure counts only when the attempt began after the last counted one came back (`mark`): steps in flight
 * together when a shim dies are one incident, not several failures in a row.
 *
 * Whoever `check` lets through as the probe must report `success`, `failure` or `abandon` (an attempt
 * that ended without saying anything about the cloud, e.g. cancelled), or the circuit stays half-open.
 * A refusal (`CircuitOpenError`) is not a failure and must not be reported as one: it would push the
 * next attempt further away with every routed token, and the circuit would never let a probe through
 * while a generation keeps routing.
 *
 * @example
 * const breaker = new CloudBackoff({ initialMs: 250, maxMs: 10_000, failureThreshold: 3 });
 * breaker.check();          // throws while open
 * breaker.failure('error'); breaker.success();
 */
import { AppError, type ErrorCode } from '../../shared/errors.ts';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Transport failures in a row that open the circuit; a missed deadline opens it at once. Default 3. */
  failureThreshold?: number;
  /** Random factor applied to each delay, e.g. 0.2 → ±20 %. */
  jitter?: number;
}

/** `deadline`: the cloud did not answer in time (opens the circuit at once); `error`: any other transport failure. */
export type FailureKind = 'error' | 'deadline';

export type CircuitState = 'closed' | 'open' | 'half-open';

export const DEFAULT_FAILURE_THRESHOLD = 3;

/**
 * The edge refused a call without trying the cloud: the breaker (UNAVAILABLE), or a shim whose tokenizer is
 * not the edge model's (FAILED_PRECONDITION, vocabulary-agreement.ts). Not a cloud failure: nothing to count.
 */
export class CircuitOpenError extends AppError {
  constructor(message: string, code: ErrorCode = 'UNAVAILABLE') {
    super(code, message);
  }
}

export class CloudBackoff {
  private failures = 0;
  /** Times the circuit opened since the last success: the exponent of the delay (0: closed). */
  private trips = 0;
  private retryAt = 0;
  private probing = false;
  private lastFailureAt = 0;
  /** Failures counted since the breaker was made (never reset): what `mark` reads. */
  private counted = 0;

  constructor(
    readonly options: BackoffOptions,
    private readonly now: () => number = () => performance.now(),
    private readonly random: () => number = Math.random,
  ) {
    const threshold = options.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD;
    if (!Number.isInteger(threshold) || threshold < 1) throw new AppError('INVALID_ARGUMENT', `failureThreshold must be an integer ≥ 1, got ${threshold}`);
  }

  /** `open` while the delay runs, `half-open` once it has passed (until a probe reports), else `closed`. */
  get state(): CircuitState {
    if (this.trips === 0) return 'closed';
    return this.now() < this.retryAt ? 'open' : 'half-open';
  }

  /** True while calls are refused: the delay runs, or a probe is already out. */
  get open(): boolean {
    const state = this.state;
    return state === 'open' || (state === 'half-open' && this.probing);
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  /**
   * Milliseconds until the next attempt on the cloud is due, for whoever probes it without traffic:
   * the rest of an open circuit's delay (0 once half-open), `initialMs` after a failure below the threshold,
   * undefined when nothing failed since the last success.
   */
  nextAttemptInMs(): number | undefined {
    if (this.trips > 0) return Math.max(0, this.retryAt - this.now());
    if (this.failures === 0) return undefined;
    return Math.max(0, this.lastFailureAt + this.options.initialMs - this.now());
  }

  /** Throws CircuitOpenError while calls are refused; in the half-open state the first caller becomes the probe. */
  check(): void {
    const state = this.state;
    if (state === 'closed') return;
    if (state === 'open') {
      const waitMs = Math.ceil(this.retryAt - this.now());
      throw new CircuitOpenError(`cloud unavailable after ${this.failures} failed attempt(s); circuit open, next attempt in ${waitMs} ms`);
    }
    if (this.probing) throw new CircuitOpenError(`cloud unavailable after ${this.failures} failed attempt(s); a reconnection attempt is in progress`);
    this.probing = true;
  }

  /**
   * A mark of the failures counted so far, taken when an attempt starts. Failures in a row are evidence only
   * from attempts made after the last one came back: steps that were all on the wire when a shim died fail
   * together, one incident, and counting each would open the circuit on every balancer that loses a worker.
   */
  mark(): number {
    return this.counted;
  }

  /** `since`: the attempt's `mark()`; a plain failure is not counted when another was counted since it began. */
  failure(kind: FailureKind = 'error', since?: number): void {
    if (kind === 'error' && since !== undefined && this.counted > since) return;
    this.counted++;
    this.failures++;
    this.lastFailureAt = this.now();
    const state = this.state;
    // Steps that were already under way when the circuit opened report late: they do not restart the delay.
    if (state === 'open') return;
    const threshold = this.options.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD;
    // A failure while half-open opens the circuit again at once: the shim has had its chance.
    if (state === 'half-open' || kind === 'deadline' || this.failures >= threshold) this.trip();
  }

  success(): void {
    this.failures = 0;
    this.trips = 0;
    this.retryAt = 0;
    this.probing = false;
  }

  /** The probe ended without a verdict on the cloud (cancelled, refused as a bad request): let another try. */
  abandon(): void {
    this.probing = false;
  }

  private trip(): void {
    this.trips++;
    this.probing = false;
    const { initialMs, maxMs, jitter = 0.2 } = this.options;
    const delay = Math.min(maxMs, initialMs * 2 ** Math.min(this.trips - 1, 52));
    this.retryAt = this.now() + delay * (1 - jitter + 2 * jitter * this.random());
  }
}
