/**
 * The step admission's lane for batch work (step-admission.ts): the tools' Score calls take turns in it, one
 * chunk of a forward pass and its rows at a time, at a lower priority than routed steps. A turn starts when
 * - no step is waiting for a slot, and after the turn a slot is still free for a step (on a shim of one slot:
 *   only when nothing else runs), so Score never takes a step's last slot; and
 * - the steps are quiet: none in flight, and none has ended within the last step's time (the recent backend
 *   time of a step, at least QUIET_FLOOR_MS), which is when the next step of a generation that just got its
 *   reply would arrive; or the turn has waited BATCH_PATIENCE_MS for that, when it starts beside the steps.
 * A routed step is interactive (a generation waits on it) and a Score call is a tool's batch job: a chunk's
 * pass beside a step's, on the same model and cores, makes the step wait for it, so chunks run in the gaps
 * between steps, and the patience keeps a steady stream of steps from starving Score past its deadline.
 * The step admission hands a freed slot to a waiting step before any turn.
 *
 * @example
 * const release = await admission.acquireBatch(signal); // one chunk's turn
 * try { await runChunk(); } finally { release(); }
 */
import { abortReason } from '../../shared/grpc/stream.ts';

/** The step admission's clock (AdmissionClock), milliseconds. */
export interface TurnClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

/** How long a turn waits for the steps to be quiet before it starts beside them. */
export const BATCH_PATIENCE_MS = 100;
/** The shortest quiet after a step that lets a turn start (before any step time is known, the whole quiet). */
export const QUIET_FLOOR_MS = 1;

/** What the lane reads of the steps' side of the admission. */
export interface StepsSide {
  waiting: number;
  inFlight: number;
  maxInFlight: number;
  /** When the last step in flight ended (the clock's ms); -Infinity before the first. */
  idleSince: number;
  /** The recent backend time of one step, ms; 0 before the first. */
  stepMs: number;
}

interface TurnWaiter {
  start(): void;
  enqueuedAt: number;
}

export class BatchTurns {
  held = 0;
  granted = 0;
  private readonly queue: TurnWaiter[] = [];
  private quietTimer: unknown;

  constructor(
    private readonly steps: () => StepsSide,
    private readonly clock: TurnClock,
    /** A turn ended: its slot may go to a waiting step. */
    private readonly released: () => void,
  ) {}

  get waiting(): number {
    return this.queue.length;
  }

  /** A turn: resolves to its release once it may start (see the top), after the turns that asked before it. */
  acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const arrived = this.clock.now();
    if (this.queue.length === 0 && this.mayStart(arrived)) return Promise.resolve(this.take());
    return new Promise<() => void>((resolve, reject) => {
      const settle = () => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.queue.splice(this.queue.indexOf(waiter), 1);
      };
      const waiter: TurnWaiter = {
        enqueuedAt: arrived,
        start: () => {
          settle();
          resolve(this.take());
        },
      };
      const onAbort = () => {
        settle();
        reject(abortReason(signal));
      };
      const timer = this.clock.setTimeout(() => this.admit(), BATCH_PATIENCE_MS);
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
      this.armQuietCheck();
    });
  }

  /** Starts the waiting turns that may start now, oldest first; to be called whenever the steps' side changes. */
  admit(): void {
    while (this.queue.length > 0 && this.mayStart(this.queue[0]!.enqueuedAt)) this.queue[0]!.start();
    this.armQuietCheck();
  }

  private mayStart(enqueuedAt: number): boolean {
    const steps = this.steps();
    if (steps.waiting > 0 || steps.inFlight + this.held >= Math.max(1, steps.maxInFlight - 1)) return false;
    return this.quietFor(steps) <= 0 || this.clock.now() - enqueuedAt >= BATCH_PATIENCE_MS;
  }

  /** Milliseconds until the steps are quiet (≤ 0: they are); Infinity while one is in flight. */
  private quietFor(steps: StepsSide): number {
    if (steps.inFlight > 0) return Number.POSITIVE_INFINITY;
    return steps.idleSince + Math.max(QUIET_FLOOR_MS, steps.stepMs) - this.clock.now();
  }

  /** Nothing else would wake a waiting turn when the steps fall quiet: a timer does. */
  private armQuietCheck(): void {
    if (this.quietTimer !== undefined || this.queue.length === 0) return;
    const wait = this.quietFor(this.steps());
    if (!Number.isFinite(wait) || wait <= 0) return;
    this.quietTimer = this.clock.setTimeout(() => {
      this.quietTimer = undefined;
      this.admit();
    }, wait);
  }

  private take(): () => void {
    this.held++;
    this.granted++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
      this.released();
    };
  }
}
