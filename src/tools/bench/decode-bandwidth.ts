/**
 * Memory bandwidth as this machine gives it to a program: timed `Float32Array.prototype.set` copies
 * (a memcpy) of buffers far larger than any cache, on one thread and on one worker per core at once.
 *
 * A copy of N bytes is counted as 2N bytes moved (N read + N written). That is the traffic the memory
 * bus carries for a large memcpy (which streams its stores past the cache), and it is the conservative
 * choice here: the decode bound divides bytes *read* by this figure, and counting a copy as N bytes
 * would halve the bandwidth, double the bound and flatter the fraction of it that decoding reaches.
 */
import { AppError } from '../../shared/errors.ts';

const GB = 1e9;

/** Bytes moved per second (read + written), in GB/s (10^9). */
export type GbPerSecond = number;

/** A source and a destination buffer of `bytes` each, every page touched. */
export function copyBuffers(bytes: number): { src: Float32Array; dst: Float32Array } {
  const src = new Float32Array(bytes / 4).fill(1);
  const dst = new Float32Array(bytes / 4);
  dst.set(src);
  return { src, dst };
}

/**
 * One thread, in this one: the fastest of `repeats` timed copies (other work on the machine can only
 * slow a copy down, so the fastest is the best estimate of what memory allows).
 */
export function singleThreadCopyBandwidth(buffers: { src: Float32Array; dst: Float32Array }, repeats: number): GbPerSecond {
  let best = Infinity;
  for (let i = 0; i < repeats; i++) {
    const t = performance.now();
    buffers.dst.set(buffers.src);
    best = Math.min(best, performance.now() - t);
  }
  return (2 * buffers.src.byteLength) / (best / 1000) / GB;
}

/**
 * Workers that copy at the same time, each its own buffers (allocated once): every `measure` lets
 * them all copy for the same time window from one start signal and adds up what they moved.
 */
export class CopyTeam {
  private round = 0;
  private readonly start = new SharedArrayBuffer(4);

  private constructor(
    private readonly workers: Worker[],
    readonly bytesPerThread: number,
  ) {}

  static async start(threads: number, bytesPerThread: number): Promise<CopyTeam> {
    const bytes = Math.floor(bytesPerThread / 4096) * 4096;
    const workers = Array.from({ length: threads }, () => new Worker(new URL('./decode-copy-worker.ts', import.meta.url).href));
    const team = new CopyTeam(workers, bytes);
    try {
      await team.all({ cmd: 'init', bytes });
    } catch (e) {
      team.close();
      throw e;
    }
    return team;
  }

  get threads(): number {
    return this.workers.length;
  }

  /** GB/s (read + written) of all workers copying together for `durationMs`: all bytes over the union of their windows. */
  async measure(durationMs: number): Promise<GbPerSecond> {
    const round = ++this.round;
    const replies = this.all({ cmd: 'run', durationMs, start: this.start, round });
    const flag = new Int32Array(this.start);
    Atomics.store(flag, 0, round);
    Atomics.notify(flag, 0);
    const results = await replies;
    const moved = results.reduce((sum, r) => sum + 2 * this.bytesPerThread * r.copies!, 0);
    const window = Math.max(...results.map((r) => r.to!)) - Math.min(...results.map((r) => r.from!));
    return moved / (window / 1000) / GB;
  }

  close(): void {
    for (const w of this.workers) w.terminate();
  }

  private all(message: Record<string, unknown>): Promise<Record<string, number>[]> {
    return Promise.all(
      this.workers.map(
        (w) =>
          new Promise<Record<string, number>>((resolve, reject) => {
            w.onmessage = (e: MessageEvent) => resolve(e.data as Record<string, number>);
            w.onerror = (e) => reject(new AppError('INTERNAL', `copy worker failed: ${e.message}`));
            w.postMessage(message);
          }),
      ),
    );
  }
}
