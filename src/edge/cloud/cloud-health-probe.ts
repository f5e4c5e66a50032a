/**
 * Brings the cloud's state back without traffic. While the breaker holds failures (the page says
 * `unavailable` or `circuit-open`), the probe asks the shim's standard gRPC health service, on the
 * breaker's own schedule: when the breaker would let the next attempt through (at once after the delay of
 * an open circuit; `initialMs` after a failure below the threshold). A SERVING answer closes the circuit and
 * clears the failures, so the header and /readyz say `ready` before any token routes; any other answer
 * counts as one failure, exactly as a failed step would, and schedules the next probe. In the half-open
 * state the probe takes the breaker's single probe slot, so it never races a routed step for it; when a
 * step holds the slot, that step's outcome reschedules the probe.
 *
 * Its timer is unref'd and its check carries a deadline: a probe never keeps a process alive, and `close`
 * stops both.
 *
 * @example
 * // check: any (signal) => Promise<boolean>; GrpcCloudClient passes its call of the shim's health service.
 * const probe = new CloudHealthProbe(backoff, (signal) => check(signal), realProbeClock);
 * backoff.failure('error'); probe.schedule(); // probes until the shim answers SERVING
 * probe.close();
 */
import type { CloudBackoff } from './cloud-backoff.ts';

export interface ProbeClock {
  /** Milliseconds on the clock the breaker uses. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

/** performance.now and unref'd timers. */
export const realProbeClock: ProbeClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

/** Resolves true when the shim answers SERVING; false or a rejection for anything else. */
export type HealthCheck = (signal: AbortSignal) => Promise<boolean>;

export class CloudHealthProbe {
  private timer: unknown;
  private inFlight: AbortController | undefined;
  private closed = false;
  /** Health checks sent so far (for tests and logs). */
  probes = 0;

  constructor(
    private readonly backoff: CloudBackoff,
    private readonly check: HealthCheck,
    private readonly clock: ProbeClock = realProbeClock,
  ) {}

  /** (Re)arms the timer for the breaker's next attempt; disarms it when the breaker holds no failure. */
  schedule(): void {
    if (this.closed || this.inFlight) return;
    this.disarm();
    const delay = this.backoff.nextAttemptInMs();
    if (delay === undefined) return;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, delay);
  }

  close(): void {
    this.closed = true;
    this.disarm();
    this.inFlight?.abort();
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async run(): Promise<void> {
    if (this.closed) return;
    // A step succeeded meanwhile (nothing to recover), or failed and restarted the delay (wait for it).
    const wait = this.backoff.nextAttemptInMs();
    if (wait === undefined) return;
    if (wait > 0) return this.schedule();
    try {
      this.backoff.check();
    } catch {
      return; // a routed step holds the probe slot: its report reschedules us
    }
    const controller = new AbortController();
    this.inFlight = controller;
    this.probes++;
    let serving = false;
    try {
      serving = await this.check(controller.signal);
    } catch {
      serving = false;
    } finally {
      this.inFlight = undefined;
    }
    if (this.closed) return this.backoff.abandon();
    if (serving) return this.backoff.success();
    this.backoff.failure('error');
    this.schedule();
  }
}
