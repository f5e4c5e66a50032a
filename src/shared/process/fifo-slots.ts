/**
 * A counting semaphore with a FIFO: at most `slots` holders at once, the rest served in arrival order. A
 * waiter whose signal aborts leaves the queue with the signal's reason. The shim's scoring calls and the
 * bench's SGLang stand-in bound their work with it.
 *
 * @example
 * const slots = new FifoSlots(2);
 * const release = await slots.acquire(signal); // later callers wait until release()
 * try { ... } finally { release(); }
 */
import { AppError } from '../errors.ts';

/** Why a wait was given up: the signal's own AppError, or CANCELLED. */
function abortReason(signal: AbortSignal): AppError {
  return signal.reason instanceof AppError ? signal.reason : new AppError('CANCELLED', 'cancelled');
}

export class FifoSlots {
  private busy = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly slots: number) {
    if (!Number.isInteger(slots) || slots < 1) throw new Error(`slots must be an integer ≥ 1, got ${slots}`);
  }

  /** Holders now, and callers waiting. */
  get load(): { serving: number; waiting: number } {
    return { serving: this.busy, waiting: this.waiting.length };
  }

  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.busy < this.slots) this.busy++;
    else {
      await new Promise<void>((resolve, reject) => {
        const start = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          this.waiting.splice(this.waiting.indexOf(start), 1);
          reject(abortReason(signal!));
        };
        if (signal?.aborted) return reject(abortReason(signal));
        this.waiting.push(start);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The slot passes straight to the oldest waiter, so `busy` stays counted for it.
      const next = this.waiting.shift();
      if (next) next();
      else this.busy--;
    };
  }
}
