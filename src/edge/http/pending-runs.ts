/**
 * Runs started by a page form and waiting for the browser to open their event stream. The slot is
 * reserved at once (so "too many generations" is reported on the form); a run whose stream never
 * opens is released after a grace period instead of holding its slot forever.
 */
import type { EdgeRuntime } from '../edge-runtime.ts';
import type { RawGenerationRequest } from '../generation-request.ts';

type Run = ReturnType<EdgeRuntime['start']>;

const STREAM_GRACE_MS = 30_000;

export class PendingRuns {
  private readonly waiting = new Map<string, { run: Run; timer: ReturnType<typeof setTimeout> }>();

  constructor(private readonly runtime: EdgeRuntime) {}

  add(raw: RawGenerationRequest): Run {
    const run = this.runtime.start(raw);
    const timer = setTimeout(() => this.cancel(run.id), STREAM_GRACE_MS);
    timer.unref?.();
    this.waiting.set(run.id, { run, timer });
    return run;
  }

  /** The run for a stream that just opened; each run can be taken once. */
  take(id: string): Run | undefined {
    const entry = this.waiting.get(id);
    if (!entry) return undefined;
    clearTimeout(entry.timer);
    this.waiting.delete(id);
    return entry.run;
  }

  /** Drops a run that has not started streaming; false when there is none waiting with that id. */
  cancel(id: string): boolean {
    const entry = this.waiting.get(id);
    if (!entry) return false;
    clearTimeout(entry.timer);
    this.waiting.delete(id);
    this.runtime.release(id);
    return true;
  }
}
