/**
 * Memory bandwidth as this machine gives it to a program: timed `Float32Array.prototype.set` copies
 * (a memcpy) of buffers far larger than any cache, on one thread and on one worker per core at once.
 *
 * A copy of N bytes is counted as 2N bytes moved (N read + N written). That is the traffic the memory
 * bus carries for a large memcpy (which streams its stores past the cache), and it is the conservative
 * choice here: the decode bound divides bytes *read* by this figure, and counting a copy as N bytes
 * would halve the bandwidth, double the bound and flatter the fraction of it that decoding reaches.
 */
import { AppError } from '../shared/errors.ts';

export interface CopyBandwidth {
  /** Bytes moved per second (read + written), in GB/s (10^9). */
  gbPerSecond: number;
  threads: number;
  /** Bytes of each thread's source buffer. */
  bytesPerThread: number;
  repeats: number;
}

const GB = 1e9;

/**
 * One thread, in this one: the fastest of `repeats` timed copies after one untimed one (other work on
 * the machine can only slow a copy down, so the fastest is the best estimate of what memory allows).
 */
export function singleThreadCopyBandwidth(bytes: number, repeats: number): CopyBandwidth {
  const src = new Float32Array(bytes / 4).fill(1);
  const dst = new Float32Array(bytes / 4);
  dst.set(src);
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t = performance.now();
    dst.set(src);
    times.push(performance.now() - t);
  }
  const ms = Math.min(...times);
  return { gbPerSecond: (2 * bytes) / (ms / 1000) / GB, threads: 1, bytesPerThread: bytes, repeats };
}

/** `threads` workers copying at the same time, `bytes` split between them; total bytes over the slowest worker's time. */
export async function parallelCopyBandwidth(bytes: number, threads: number, repeats: number): Promise<CopyBandwidth> {
  const each = Math.floor(bytes / threads / 4096) * 4096;
  const start = new SharedArrayBuffer(4);
  const workers = Array.from({ length: threads }, () => new Worker(new URL('./bench-decode-copy-worker.ts', import.meta.url).href));
  try {
    const message = (w: Worker) =>
      new Promise<Record<string, number>>((resolve, reject) => {
        w.onmessage = (e: MessageEvent) => resolve(e.data as Record<string, number>);
        w.onerror = (e) => reject(new AppError('INTERNAL', `copy worker failed: ${e.message}`));
      });
    const ready = workers.map(message);
    for (const w of workers) w.postMessage({ bytes: each, repeats, start });
    await Promise.all(ready);
    const done = workers.map(message);
    Atomics.store(new Int32Array(start), 0, 1);
    Atomics.notify(new Int32Array(start), 0);
    const results = await Promise.all(done);
    const slowest = Math.max(...results.map((r) => r.ms!));
    return { gbPerSecond: (2 * each * repeats * threads) / (slowest / 1000) / GB, threads, bytesPerThread: each, repeats };
  } finally {
    for (const w of workers) w.terminate();
  }
}
