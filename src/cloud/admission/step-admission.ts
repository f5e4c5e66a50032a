/**
 * Admission control in front of the shim's backend, shared by all sessions: at most `maxInFlight` backend
 * calls run at once, the others wait in arrival order, and a waiting step that would miss its deadline is
 * refused (`overloaded`) instead of being queued past it, so that the edge decides the position itself at once.
 *
 * When a step has to wait, its start is predicted from its place in the queue: position × the recent backend
 * time of one step / maxInFlight (the slots free up at that rate when they are all busy). It is refused at
 * once when that is later than its latest useful start, and otherwise refused when it is still waiting at
 * that moment, or when a slot frees up later than that by the average as it then stands. The latest useful start is the deadline minus the recent backend time (a step that starts
 * later would not finish in time), and at least a tenth of the deadline before it: the edge's deadline
 * runs from its send and includes the link, so a refusal that leaves the shim at the deadline would reach the
 * edge after it gave up, as a missed deadline (which opens its breaker) rather than as an overloaded step.
 *
 * The recent backend time is a moving average of the time a slot was held by the calls that succeeded.
 * Transport-free and clock-injected, like the edge's breaker: the unit tests drive it with a fake clock.
 *
 * Batch work (the tools' Score calls, a chunk at a time) takes turns in a lane of lower priority
 * (batch-turns.ts): a freed slot goes to a waiting step before any turn, a turn never takes a step's last
 * slot, and turns run in the gaps between steps. Turns stay out of the steps' moving average.
 *
 * @example
 * const admission = new StepAdmission(8);
 * const slot = await admission.acquire(1_000, signal);
 * if (slot === 'overloaded') return overloadedReply(admission.load());
 * try { result = await backend.step(request); load = slot.release(true); } catch (e) { slot.release(false); throw e; }
 */
import { AppError } from '../../shared/errors.ts';
import { abortReason } from '../../shared/grpc/stream.ts';
import { BatchTurns, type StepsSide } from './batch-turns.ts';

export interface AdmissionClock {
  /** Milliseconds. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

export const realAdmissionClock: AdmissionClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

/** The admission state, as the proto's `ShimLoad` carries it. */
export interface AdmissionLoad {
  stepsInFlight: number;
  stepsQueued: number;
  /** Moving average of one step's backend time, ms; 0 before the first. */
  backendMs: number;
  maxInFlight: number;
}

/** A backend slot: `release` exactly once, saying whether the call succeeded (only those feed the average). */
export interface AdmissionSlot {
  /** Milliseconds the step waited for the slot; exactly 0 when one was free. */
  readonly waitedMs: number;
  /**
   * Frees the slot for the oldest waiter. Returns the load as the call ended: its own time in the average
   * (when it succeeded) and itself still in flight, which is what its result reports.
   */
  release(succeeded: boolean): AdmissionLoad;
}

/** Weight of the newest backend time in the moving average: about the last ten steps count. */
export const BACKEND_TIME_SMOOTHING = 0.2;
/** The share of a deadline a refusal keeps for the way back to the edge (see the top of this file). */
export const REPLY_MARGIN = 0.1;

/** Batch work now: turns holding a slot and turns waiting; `granted` and `stepsBesideBatch` count since start. */
export interface BatchLoad {
  held: number;
  waiting: number;
  /** Turns granted since the shim started. */
  granted: number;
  /** Steps that took a slot while batch work held one (the steps went ahead of it, as they should). */
  stepsBesideBatch: number;
}

interface Waiter {
  grant(slot: AdmissionSlot): void;
  refuse(): void;
  enqueuedAt: number;
  deadlineMs: number;
}

export class StepAdmission {
  private inFlight = 0;
  private readonly queue: Waiter[] = [];
  private averageMs = 0;
  private measured = false;
  /** Steps refused as overloaded since the shim started. */
  overloaded = 0;
  /** When the last step in flight ended; -Infinity before the first. */
  private idleSince = Number.NEGATIVE_INFINITY;
  private readonly batch: BatchTurns;
  private stepsBesideBatch = 0;

  constructor(
    readonly maxInFlight: number,
    private readonly clock: AdmissionClock = realAdmissionClock,
  ) {
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new AppError('INVALID_ARGUMENT', `maxInFlight must be an integer ≥ 1, got ${maxInFlight}`);
    const steps = (): StepsSide => ({ waiting: this.queue.length, inFlight: this.inFlight, maxInFlight, idleSince: this.idleSince, stepMs: this.averageMs });
    this.batch = new BatchTurns(steps, clock, () => this.admitNext());
  }

  load(): AdmissionLoad {
    return { stepsInFlight: this.inFlight, stepsQueued: this.queue.length, backendMs: this.averageMs, maxInFlight: this.maxInFlight };
  }

  batchLoad(): BatchLoad {
    return { held: this.batch.held, waiting: this.batch.waiting, granted: this.batch.granted, stepsBesideBatch: this.stepsBesideBatch };
  }

  /**
   * The latest moment, counted from a step's arrival, at which it may still start: see the top of this file.
   *
   * @example
   * admission.latestStartMs(1_000); // 700 when the recent backend time is 300 ms; 900 before any step
   */
  latestStartMs(deadlineMs: number): number {
    return deadlineMs - Math.max(this.averageMs, deadlineMs * REPLY_MARGIN);
  }

  /**
   * A slot for one backend call of a step whose deadline is `deadlineMs` from now: at once when one is free,
   * after the steps ahead otherwise, or `overloaded` when it would start too late. Rejects with the signal's
   * reason when it aborts while waiting.
   */
  acquire(deadlineMs: number, signal: AbortSignal): Promise<AdmissionSlot | 'overloaded'> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const arrived = this.clock.now();
    if (this.freeSlots() > 0 && this.queue.length === 0) return Promise.resolve(this.take(arrived, arrived));
    const latestStart = this.latestStartMs(deadlineMs);
    const position = this.queue.length + 1;
    if ((position * this.averageMs) / this.maxInFlight > latestStart) return Promise.resolve(this.refuse());
    return new Promise<AdmissionSlot | 'overloaded'>((resolve, reject) => {
      const settle = () => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        const index = this.queue.indexOf(waiter);
        if (index >= 0) this.queue.splice(index, 1);
      };
      const waiter: Waiter = {
        enqueuedAt: arrived,
        deadlineMs,
        grant: (slot) => {
          settle();
          resolve(slot);
        },
        refuse: () => {
          settle();
          resolve(this.refuse());
        },
      };
      const onAbort = () => {
        settle();
        reject(abortReason(signal));
      };
      const timer = this.clock.setTimeout(() => waiter.refuse(), Math.max(0, latestStart));
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  /**
   * A slot only if one is free now and no step waits for one; undefined otherwise, which is no refusal:
   * work nobody waits for (an extend computed ahead) never queues in front of a step.
   */
  tryAcquire(signal: AbortSignal): AdmissionSlot | undefined {
    if (signal.aborted || this.freeSlots() === 0 || this.queue.length > 0) return undefined;
    return this.take(this.clock.now());
  }

  private refuse(): 'overloaded' {
    this.overloaded++;
    return 'overloaded';
  }

  /** A turn of batch work (batch-turns.ts); rejects with the signal's reason when it aborts while waiting. */
  acquireBatch(signal: AbortSignal): Promise<() => void> {
    return this.batch.acquire(signal);
  }

  private freeSlots(): number {
    return this.maxInFlight - this.inFlight - this.batch.held;
  }

  private take(arrived: number, started = this.clock.now()): AdmissionSlot {
    if (this.batch.held > 0) this.stepsBesideBatch++;
    this.inFlight++;
    let released = false;
    return {
      waitedMs: started - arrived,
      release: (succeeded) => {
        if (released) return this.load();
        released = true;
        if (succeeded) this.record(this.clock.now() - started);
        const load = this.load();
        this.inFlight--;
        if (this.inFlight === 0) this.idleSince = this.clock.now();
        this.admitNext();
        return load;
      },
    };
  }

  /**
   * Hands the free slots to the oldest waiting steps that can still start in time by the current average
   * (which may have grown since they queued: before the first measurement nothing could be predicted; the
   * others are refused), then to waiting batch turns while they leave room (see the top of this file).
   */
  private admitNext(): void {
    while (this.queue.length > 0 && this.freeSlots() > 0) {
      const next = this.queue[0]!;
      if (this.clock.now() - next.enqueuedAt > this.latestStartMs(next.deadlineMs)) next.refuse();
      else next.grant(this.take(next.enqueuedAt));
    }
    this.batch.admit();
  }

  private record(ms: number): void {
    this.averageMs = this.measured ? this.averageMs + BACKEND_TIME_SMOOTHING * (ms - this.averageMs) : ms;
    this.measured = true;
  }
}
