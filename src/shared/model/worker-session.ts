/**
 * A model session whose forward passes run on a worker thread of its own (session-worker.ts). onnxruntime-
 * node runs a session synchronously on the JavaScript thread, so a pass of a large model stops every timer,
 * socket read and HTTP or gRPC request of the process until it ends; here the pass runs on the worker while
 * this thread's event loop keeps turning. Feeds cross as copies (session-worker-protocol.ts), outputs come
 * back transferred. Created with `createSessionOn` on the worker, so the provider fallback works as on the
 * main thread, and its warnings reach the caller's logger.
 *
 * A run's failure rejects it with onnxruntime's message (runSession adds the inputs); a worker that stops
 * rejects every pending and later call with the reason, never leaving one waiting. The worker keeps the
 * process alive only while a call is pending.
 *
 * @example
 * const { session } = await openSessionOnWorker(pack.modelPath, { graphOptimizationLevel: 'all' }, ['cpu'], log);
 * const out = await runSession(session, feeds);
 * await session.release(); // releases the session and ends the worker
 */
import { AppError, errorMessage } from '../errors.ts';
import { silentLogger, type Logger } from '../process/logger.ts';
import type { ModelSession, SessionFetches } from './model-session.ts';
import type { OrtTensor, SessionOptions, ValueMetadata } from './ort.ts';
import { type LoadedSession, type SessionReply, type SessionRequest, tensorsFromWire, tensorsToWire } from './session-worker-protocol.ts';

type Reply = Extract<SessionReply, { id: number }>;

export interface SessionOnWorker {
  session: WorkerSession;
  /** The providers the session was created with, in order of preference (after any fallback). */
  executionProviders: readonly string[];
}

/** Starts a worker, waits for it to be ready, and creates the session there (see the header). */
export async function openSessionOnWorker(
  model: string,
  options: SessionOptions,
  requested: readonly string[],
  log: Logger = silentLogger,
): Promise<SessionOnWorker> {
  const session = new WorkerSession(new Worker(new URL('./session-worker.ts', import.meta.url).href), log);
  try {
    const loaded = await session.load(model, options, requested);
    return { session, executionProviders: loaded.executionProviders };
  } catch (e) {
    session.terminate();
    throw e;
  }
}

export class WorkerSession implements ModelSession {
  /** What the worker's session declares; empty until it is loaded. */
  private declared: LoadedSession = { inputNames: [], outputNames: [], inputMetadata: [], outputMetadata: [], executionProviders: [] };
  private readonly pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  private nextId = 0;
  /** Why the worker cannot answer any more; set once. */
  private stopped: AppError | undefined;
  /** Settles when the worker says it is ready, or stops first. */
  private readonly ready: Promise<void>;
  private notReady: (reason: AppError) => void = () => {};

  /** @internal use openSessionOnWorker */
  constructor(
    private readonly worker: Worker,
    private readonly log: Logger,
  ) {
    let markReady: () => void = () => {};
    this.ready = new Promise((resolve, reject) => {
      markReady = resolve;
      this.notReady = reject;
    });
    // A worker that stops before it is ready rejects this; whoever waits on it sees that rejection.
    this.ready.catch(() => {});
    worker.onmessage = (event: MessageEvent<SessionReply>) => {
      const message = event.data;
      if (message.kind === 'ready') markReady();
      else if (message.kind === 'log') this.log[message.level](message.message, message.fields);
      else this.settle(message);
    };
    worker.addEventListener('error', (event) => this.stop(`failed: ${event.message}`));
    worker.addEventListener('close', () => this.stop('stopped'));
  }

  /** @internal */
  async load(model: string, options: SessionOptions, providers: readonly string[]): Promise<LoadedSession> {
    const reply = await this.request((id) => ({ kind: 'load', id, model, options, providers }));
    if (reply.kind !== 'loaded') throw unexpected(reply);
    this.declared = reply;
    return reply;
  }

  get inputNames(): readonly string[] {
    return this.declared.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.declared.outputNames;
  }
  get inputMetadata(): readonly ValueMetadata[] {
    return this.declared.inputMetadata;
  }
  get outputMetadata(): readonly ValueMetadata[] {
    return this.declared.outputMetadata;
  }

  /**
   * One forward pass on the worker. `fetches` may only name outputs for onnxruntime to allocate: a tensor to
   * be written in place cannot be, across threads (the worker writes its own copy), so it is refused.
   */
  async run(feeds: Readonly<Record<string, OrtTensor>>, fetches?: SessionFetches): Promise<Record<string, OrtTensor>> {
    const inPlace = Object.entries(fetches ?? {}).filter(([, tensor]) => tensor !== null);
    if (inPlace.length) {
      throw new AppError(
        'INTERNAL',
        `a session on a worker thread cannot write outputs in place (${inPlace.map(([name]) => name).join(', ')}); run this model on the main thread`,
      );
    }
    const wire = tensorsToWire(feeds);
    const reply = await this.request((id) => ({ kind: 'run', id, feeds: wire, ...(fetches ? { fetches: Object.keys(fetches) } : {}) }));
    if (reply.kind !== 'ran') throw unexpected(reply);
    return tensorsFromWire(reply.outputs);
  }

  /** Releases the session and ends the worker; later calls reject. Again: nothing. */
  async release(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.request((id) => ({ kind: 'release', id }));
    } finally {
      this.stop('released', new AppError('INTERNAL', 'the model session was released'));
      this.worker.terminate();
    }
  }

  /** Asks the worker to write the profile; it does so after the runs already asked for, before any later one. */
  endProfiling(): void {
    if (!this.stopped) this.worker.postMessage({ kind: 'endProfiling' } satisfies SessionRequest);
  }

  /** Ends the worker at once, as a crash would: pending and later calls reject. */
  terminate(): void {
    this.stop('terminated');
    this.worker.terminate();
  }

  /** Sends `request` with a new id (feeds copied, not transferred: the caller keeps its tensors); resolves with the reply. */
  private async request(request: (id: number) => SessionRequest): Promise<Reply> {
    if (this.stopped) throw this.stopped;
    await this.ready;
    if (this.stopped) throw this.stopped;
    const id = this.nextId++;
    const reply = new Promise<Reply>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    if (this.pending.size === 1) this.worker.ref();
    try {
      this.worker.postMessage(request(id));
    } catch (e) {
      // Not sent (a value that cannot be cloned): nothing will answer it.
      this.forget(id);
      throw new AppError('INTERNAL', `could not send to the model session's worker thread: ${errorMessage(e)}`, { cause: e });
    }
    return reply;
  }

  /** The waiting call of `id`, no longer pending; the worker keeps the process alive only while one is. */
  private forget(id: number) {
    const waiting = this.pending.get(id);
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
    return waiting;
  }

  private settle(reply: Reply): void {
    const waiting = this.forget(reply.id);
    if (!waiting) return;
    if (reply.kind === 'failed') waiting.reject(reply.code ? new AppError(reply.code, reply.message) : new Error(reply.message));
    else waiting.resolve(reply);
  }

  private stop(what: string, reason = new AppError('INTERNAL', `the model session's worker thread ${what}`)): void {
    if (this.stopped) return;
    this.stopped = reason;
    this.notReady(reason);
    for (const { reject } of this.pending.values()) reject(reason);
    this.pending.clear();
    this.worker.unref();
  }
}

function unexpected(reply: Reply): Error {
  return new AppError('INTERNAL', `the model session's worker answered ${reply.kind} out of turn`);
}
