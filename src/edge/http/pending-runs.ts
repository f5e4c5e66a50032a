/**
 * Runs a page form asked for, from the post until they are over. A run holds no generation slot until
 * the browser opens its event stream: its request is checked when the form is posted (a bad field, or an
 * edge that is full right now, is answered on the form), and the slot is taken when the stream opens.
 * Reserving the slot at post time would let posts that never open their stream refuse every other user
 * (page, API and gRPC) for as long as they are kept; checking twice costs one more tokenization, and a run
 * can find the edge full when its stream opens, in which case the stream ends saying so. Runs waiting
 * for their stream are bounded in number (the oldest is dropped) and in time (the grace period).
 *
 * @example
 * const run = await pending.add(raw);                   // on POST /runs: checked, no slot taken
 * const same = pending.take(run.id);              // on GET /runs/:id/events: once
 * const queued = await pending.add(raw, { after: run }); // starts only once `run` is over
 * const turn = await pending.add({ ...raw, prompt: text }, { promptIds: ids, chatTurn }); // a chat's turn (chat-routes.tsx)
 */
import type { EdgeRuntime } from '../edge-runtime.ts';
import type { GenerationRequest, RawGenerationRequest } from '../request/generation-request.ts';

const STREAM_GRACE_MS = 30_000;
const MAX_WAITING = 32;

export interface PageRun {
  readonly id: string;
  readonly raw: RawGenerationRequest;
  /** The request as checked when the form was posted. */
  readonly request: GenerationRequest;
  /** Aborted by Stop, before or during the generation. */
  readonly stopped: AbortSignal;
  /** Resolves once the run is over (finished, failed, stopped or dropped). */
  readonly over: Promise<void>;
  /** Another run this one starts after (Compare runs its two sides one after the other). */
  readonly after?: PageRun;
  /** The prompt's ids, where the run starts from ids (a chat's turn: its template's rendering of the conversation). */
  readonly promptIds?: readonly number[];
  /** A chat's turn: given the reply at the run's done event, to keep it in the conversation (chat-store.ts). */
  readonly chatTurn?: ChatTurn;
}

export interface ChatTurn {
  commit(reply: string): void;
}

export interface PageRunOptions {
  after?: PageRun;
  promptIds?: readonly number[];
  chatTurn?: ChatTurn;
}

interface Entry {
  run: PageRun;
  stop: AbortController;
  finish: () => void;
  timer?: ReturnType<typeof setTimeout>;
}

export class PendingRuns {
  /** Every run not yet over; `timer` is set while it waits for its stream. */
  private readonly runs = new Map<string, Entry>();

  constructor(private readonly runtime: EdgeRuntime) {}

  /** Checks `raw` (throwing the refusal) and keeps the run until its stream opens; takes no slot. */
  async add(raw: RawGenerationRequest, options: PageRunOptions = {}): Promise<PageRun> {
    const request = this.runtime.check(raw, options.promptIds);
    await this.runtime.prepare(request);
    this.dropOldestWaiting();
    const stop = new AbortController();
    let finish!: () => void;
    const over = new Promise<void>((resolve) => (finish = resolve));
    const run: PageRun = { id: crypto.randomUUID(), raw, request, stopped: stop.signal, over, ...options };
    const timer = setTimeout(() => this.end(run.id), STREAM_GRACE_MS);
    timer.unref?.();
    this.runs.set(run.id, { run, stop, finish, timer });
    this.runtime.awaitingStart.add(run.id);
    return run;
  }

  /** The run for a stream that just opened; each run can be taken once. Call `end` when it is over. */
  take(id: string): PageRun | undefined {
    const entry = this.runs.get(id);
    if (!entry?.timer) return undefined;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    return entry.run;
  }

  /** Stops a run, waiting or streaming; false when there is no such run. */
  stop(id: string): boolean {
    const entry = this.runs.get(id);
    if (!entry) return false;
    entry.stop.abort();
    // A run whose stream never opened is over now; a streaming one ends through its stream.
    if (entry.timer) this.end(id);
    return true;
  }

  /** Forgets a run and lets the runs queued after it go. */
  end(id: string): void {
    const entry = this.runs.get(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.runs.delete(id);
    this.runtime.awaitingStart.delete(id);
    entry.finish();
  }

  private dropOldestWaiting(): void {
    const waiting = [...this.runs.values()].filter((e) => e.timer);
    // Map iteration follows insertion order, so the first waiting entry is the oldest.
    if (waiting.length >= MAX_WAITING) this.end(waiting[0]!.run.id);
  }
}
