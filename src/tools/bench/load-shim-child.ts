/**
 * The parent side of the benchmarks' shim process (load-shim.ts): starts it (pinned to CPUs when asked),
 * waits until it listens, asks it for its memory and CPU figures, and stops it.
 *
 * @example
 * const { shim, address } = await ShimChild.start({ modelPack: DEMO.cloudPack, threads: 1 }, { cpus: '1' });
 * console.log((await shim.stats()).rssMb);
 * await shim.stop();
 */
import type { ShimConfig } from '../../cloud/config.ts';
import { AppError } from '../../shared/errors.ts';
import { startIpcChild, stopIpcChild, type IpcChild } from './ipc-child.ts';
import type { ShimChildReply, ShimChildRequest, ShimStats } from './load-shim.ts';

export interface ShimChildOptions {
  /** taskset CPU list of the shim process; unpinned when absent. */
  cpus?: string;
  timeoutMs?: number;
}

/** The shim child process and its IPC channel. */
export class ShimChild {
  private readonly waiting = new Map<number, (stats: ShimStats) => void>();
  private nextId = 0;
  private child: IpcChild | undefined;

  private constructor() {}

  static async start(overrides: Partial<ShimConfig>, options: ShimChildOptions = {}): Promise<{ shim: ShimChild; address: string }> {
    const shim = new ShimChild();
    const { child, ready } = await startIpcChild<ShimChildReply>({
      script: new URL('./load-shim.ts', import.meta.url).pathname,
      options: overrides,
      name: 'the shim process',
      cpus: options.cpus,
      timeoutMs: options.timeoutMs,
      onMessage: (reply) => shim.receive(reply),
    });
    shim.child = child;
    return { shim, address: ready.address };
  }

  /**
   * The shim's memory, CPU time and what it holds. `collect` (default) forces a GC there first, for
   * comparable memory figures; leave it off while load runs, where a full GC would stall the shim.
   */
  async stats(options: { collect?: boolean; timeoutMs?: number } = {}): Promise<ShimStats> {
    const { collect = true, timeoutMs = 10_000 } = options;
    const id = this.nextId++;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await new Promise<ShimStats>((resolve, reject) => {
        this.waiting.set(id, resolve);
        timer = setTimeout(() => reject(new AppError('DEADLINE_EXCEEDED', `the shim did not report its stats within ${timeoutMs} ms`)), timeoutMs);
        this.send({ type: 'stats', id, collect });
      });
    } finally {
      clearTimeout(timer);
      this.waiting.delete(id);
    }
  }

  /** Asks the shim to shut down; kills it when it has not exited within `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.child) await stopIpcChild(this.child, { type: 'stop' } satisfies ShimChildRequest, graceMs);
  }

  private send(request: ShimChildRequest): void {
    this.child!.send(request);
  }

  private receive(reply: ShimChildReply): void {
    if (reply.type === 'stats') {
      const { type: _type, id, ...stats } = reply;
      this.waiting.get(id)?.(stats);
    }
  }
}
