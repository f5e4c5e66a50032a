/**
 * Turns a grpc-js stream into one pull-based reader, so application code awaits `next(signal)` instead of
 * wiring `on('data')` handlers. The event listeners live here and nowhere else. The reader pauses the
 * stream while it holds more than `highWaterMark` unread messages (flow control towards the peer).
 *
 * @example
 * const reader = new StreamReader<RouteRequest__Output>(call);
 * for (let m = await reader.next(signal); !m.done; m = await reader.next(signal)) handle(m.value);
 */
import type { Readable, Writable } from 'node:stream';
import { AppError } from '../errors.ts';
import { toAppError } from './errors.ts';

type Waiter<T> = { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void };

export class StreamReader<T> {
  private readonly queue: T[] = [];
  private waiter: Waiter<T> | undefined;
  private ended = false;
  private failure: AppError | undefined;
  private paused = false;

  constructor(
    private readonly stream: Readable,
    private readonly highWaterMark = 16,
  ) {
    stream.on('data', (message: T) => {
      if (this.waiter) {
        const { resolve } = this.waiter;
        this.waiter = undefined;
        resolve({ value: message, done: false });
        return;
      }
      this.queue.push(message);
      if (this.queue.length >= this.highWaterMark && !this.paused) {
        this.paused = true;
        stream.pause();
      }
    });
    stream.on('end', () => this.finish());
    stream.on('error', (e: unknown) => this.fail(e));
  }

  /** True once the stream ended or failed and every queued message was read. */
  get finished(): boolean {
    return (this.ended || this.failure !== undefined) && this.queue.length === 0;
  }

  /** Messages received and not read yet. */
  get buffered(): number {
    return this.queue.length;
  }

  /** The error that ended the stream, if any. */
  get error(): AppError | undefined {
    return this.failure;
  }

  /** Ends the reader with `e` (e.g. the call was cancelled); queued messages are still delivered first. */
  fail(e: unknown): void {
    if (this.ended || this.failure) return;
    this.failure = toAppError(e);
    if (this.waiter && this.queue.length === 0) {
      const { reject } = this.waiter;
      this.waiter = undefined;
      reject(this.failure);
    }
  }

  private finish(): void {
    if (this.ended || this.failure) return;
    this.ended = true;
    if (this.waiter && this.queue.length === 0) {
      const { resolve } = this.waiter;
      this.waiter = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  /** The next message, `done` at a clean end; rejects with the stream's error or the signal's reason. */
  next(signal?: AbortSignal): Promise<IteratorResult<T>> {
    if (this.queue.length > 0) return Promise.resolve({ value: this.shift(), done: false });
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (this.waiter) return Promise.reject(new AppError('INTERNAL', 'StreamReader.next called while another read is pending'));
    return new Promise<IteratorResult<T>>((resolve, reject) => {
      const onAbort = () => {
        this.waiter = undefined;
        reject(abortReason(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiter = {
        resolve: (r) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(r);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
    });
  }

  /** The next message if it has arrived and `wanted` says so, without waiting; undefined otherwise (it stays queued). */
  takeIf(wanted: (message: T) => boolean): T | undefined {
    return this.queue.length > 0 && wanted(this.queue[0]!) ? this.shift() : undefined;
  }

  private shift(): T {
    const value = this.queue.shift()!;
    if (this.paused && this.queue.length < this.highWaterMark / 2) {
      this.paused = false;
      this.stream.resume();
    }
    return value;
  }
}

/** The reason an aborted signal carries, as an AppError (CANCELLED when it carries none of ours). */
export function abortReason(signal: AbortSignal): AppError {
  const reason: unknown = signal.reason;
  if (reason instanceof AppError) return reason;
  return toAppError(reason ?? new AppError('CANCELLED', 'cancelled'));
}

/** Writes one message, waiting for 'drain' when the stream's buffer is full. */
export async function writeMessage<T>(stream: Writable, message: T): Promise<void> {
  if (stream.write(message)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (e?: unknown) => {
      stream.off('drain', done);
      stream.off('close', done);
      stream.off('error', done);
      if (e) reject(toAppError(e));
      else resolve();
    };
    stream.once('drain', () => done());
    stream.once('close', () => done());
    stream.once('error', done);
  });
}
