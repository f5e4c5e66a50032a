/**
 * The parent side of `bench load`'s shim process (load-shim.ts): starts it, waits until it listens, asks
 * it for its memory figures, and stops it.
 *
 * @example
 * const { shim, address } = await ShimChild.start({ modelPack: DEMO.cloudPack, threads: 1 });
 * console.log((await shim.stats()).rssMb);
 * await shim.stop();
 */
import type { ShimConfig } from '../../cloud/config.ts';
import { AppError } from '../../shared/errors.ts';
import type { ShimChildReply, ShimChildRequest, ShimStats } from './load-shim.ts';

/** The shim child process and its IPC channel. */
export class ShimChild {
  private readonly waiting = new Map<number, (stats: ShimStats) => void>();
  private nextId = 0;
  private onReady: ((reply: ShimChildReply) => void) | undefined;

  private constructor(private readonly child: ReturnType<typeof Bun.spawn>) {}

  static async start(overrides: Partial<ShimConfig>, timeoutMs = 120_000): Promise<{ shim: ShimChild; address: string }> {
    let shim: ShimChild | undefined;
    const child = Bun.spawn([process.execPath, new URL('./load-shim.ts', import.meta.url).pathname, JSON.stringify(overrides)], {
      stdin: 'ignore',
      stdout: 'inherit',
      stderr: 'inherit',
      serialization: 'json',
      ipc: (reply: ShimChildReply) => shim?.receive(reply),
    });
    shim = new ShimChild(child);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const reply = await Promise.race([
        new Promise<ShimChildReply>((resolve) => (shim.onReady = resolve)),
        child.exited.then((code): ShimChildReply => ({ type: 'failed', message: `the shim process exited with code ${code}` })),
        new Promise<ShimChildReply>((resolve) => (timer = setTimeout(() => resolve({ type: 'failed', message: `the shim did not start within ${timeoutMs} ms` }), timeoutMs))),
      ]);
      if (reply.type !== 'ready') throw new AppError('UNAVAILABLE', reply.type === 'failed' ? reply.message : 'unexpected message from the shim');
      return { shim, address: reply.address };
    } catch (e) {
      await shim.stop();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The shim's memory and what it holds, after a forced GC there. */
  async stats(timeoutMs = 10_000): Promise<ShimStats> {
    const id = this.nextId++;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await new Promise<ShimStats>((resolve, reject) => {
        this.waiting.set(id, resolve);
        timer = setTimeout(() => reject(new AppError('DEADLINE_EXCEEDED', `the shim did not report its stats within ${timeoutMs} ms`)), timeoutMs);
        this.send({ type: 'stats', id });
      });
    } finally {
      clearTimeout(timer);
      this.waiting.delete(id);
    }
  }

  /** Asks the shim to shut down; kills it when it has not exited within `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      try {
        this.send({ type: 'stop' });
      } catch {
        // The channel is already gone: the kill below ends it.
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exited = await Promise.race([this.child.exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
    clearTimeout(timer);
    if (!exited) {
      this.child.kill('SIGKILL');
      await this.child.exited;
    }
  }

  private send(request: ShimChildRequest): void {
    this.child.send(request);
  }

  private receive(reply: ShimChildReply): void {
    if (reply.type === 'stats') {
      const { type: _type, id, ...stats } = reply;
      this.waiting.get(id)?.(stats);
    } else {
      this.onReady?.(reply);
    }
  }
}
