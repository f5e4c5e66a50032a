/**
 * One server process of `bun run start`, kept running: spawned with an IPC channel so it can say when it
 * serves (ready-notice.ts), and restarted with a growing delay when it dies after having served once. A
 * child that dies before it ever served is not restarted (a bad setting or a port in use would fail again,
 * and a stop signal meant it): `ended` resolves instead, so the launcher can stop.
 *
 * Restart delays double from `initialMs` to `maxMs` and start again from `initialMs` once a child has
 * served for `stableMs`: a shim that crashes once an hour restarts at once each time, one that crashes
 * at every start slows down instead of spinning.
 *
 * Stopping goes over the IPC channel too, as a StopRequest (graceful-signals.ts): a child with a launcher
 * leaves the signals that reach its whole process group (a terminal's Ctrl-C) to the launcher, so each
 * stop request reaches it once. `stop` sends the first, `repeatStop` each later one.
 *
 * @example
 * const shim = new SupervisedChild({ name: 'cloud shim', command: ['bun', 'src/cloud/main.ts'], env }, print);
 * await shim.firstReady; // or shim.ended, when it could not start
 * await shim.stop();
 */
import type { Subprocess } from 'bun';
import { errorMessage } from './shared/errors.ts';
import type { StopRequest } from './shared/process/graceful-signals.ts';
import { isReadyNotice } from './shared/process/ready-notice.ts';

export interface SupervisedChildOptions {
  name: string;
  command: string[];
  env: Record<string, string | undefined>;
  initialMs?: number;
  maxMs?: number;
  stableMs?: number;
}

/** How a child ended for good. */
export interface ChildEnd {
  /** "exited with code 0", "exited with signal SIGKILL", ... */
  description: string;
  /**
   * It ended as asked: exit code 0; or it was down between restarts when the launcher stopped; or it died
   * of SIGTERM or SIGINT (a stop signal that came in the few milliseconds before its handlers existed).
   * The last is systemd's rule for a clean exit too, and it keeps the verdict independent of whether the
   * launcher or the child saw a process group's signal first.
   */
  clean: boolean;
  served: boolean;
}

/** The delay before restart number `attempt` (0-based): doubling from `initialMs`, capped at `maxMs`. */
export function restartDelayMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}

export class SupervisedChild {
  /** Resolves when the child serves for the first time. */
  readonly firstReady: Promise<string>;
  /** Resolves when the child is gone for good: stopped, or dead before it ever served. */
  readonly ended: Promise<ChildEnd>;
  private process: Subprocess | undefined;
  private stopping = false;
  private served = false;
  private restarts = 0;
  private readyAt = 0;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;
  /** Dead and waiting for its restart. */
  private down = false;
  private resolveReady!: (address: string) => void;
  private resolveEnded!: (end: ChildEnd) => void;

  constructor(
    private readonly options: SupervisedChildOptions,
    private readonly print: (line: string) => void,
  ) {
    this.firstReady = new Promise((resolve) => (this.resolveReady = resolve));
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
    this.spawn();
  }

  get name(): string {
    return this.options.name;
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  /**
   * Asks the child to stop, once however often this is called (`signal`: the one the launcher got, for the
   * child's log), and waits for it; no restart follows.
   */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    clearTimeout(this.restartTimer);
    if (!this.stopping) {
      this.stopping = true;
      const child = this.process;
      if (child && isRunning(child)) this.requestStop(child, signal);
      else this.finish(child);
    }
    await this.ended;
  }

  /** A further stop request after `stop` (another Ctrl-C): the child logs it; its third forces its exit. */
  repeatStop(signal: NodeJS.Signals): void {
    const child = this.process;
    if (this.stopping && child && isRunning(child)) this.requestStop(child, signal);
  }

  /** Ends the child at once (the launcher's forced exit). */
  kill(): void {
    clearTimeout(this.restartTimer);
    this.stopping = true;
    const child = this.process;
    if (child && isRunning(child)) child.kill('SIGKILL');
    else this.finish(child);
  }

  private requestStop(child: Subprocess, signal: NodeJS.Signals): void {
    try {
      child.send({ type: 'stop', signal } satisfies StopRequest);
    } catch (e) {
      // The channel closes as the child exits; a SIGTERM asks the same of whatever is left of it.
      this.print(`${this.options.name}: no IPC channel to send the stop over (${errorMessage(e)}); sending SIGTERM`);
      child.kill('SIGTERM');
    }
  }

  private spawn(): void {
    const child = Bun.spawn(this.options.command, {
      env: this.options.env,
      stdout: 'inherit',
      stderr: 'inherit',
      ipc: (message) => {
        if (!isReadyNotice(message)) return;
        this.readyAt = performance.now();
        if (!this.served) {
          this.served = true;
          this.resolveReady(message.address);
        } else {
          this.print(`${this.options.name} is serving again (pid ${child.pid})`);
        }
      },
    });
    this.process = child;
    this.print(`started ${this.options.name} (pid ${child.pid})`);
    void child.exited.then(() => this.onExit(child));
  }

  private onExit(child: Subprocess): void {
    if (child !== this.process) return;
    if (this.stopping || !this.served) return this.finish(child);
    const { initialMs = 250, maxMs = 10_000, stableMs = 30_000 } = this.options;
    if (performance.now() - this.readyAt >= stableMs) this.restarts = 0;
    const delay = restartDelayMs(this.restarts++, initialMs, maxMs);
    this.print(`${this.options.name} ${describeExit(child)}; restarting in ${delay} ms`);
    this.down = true;
    this.restartTimer = setTimeout(() => {
      this.down = false;
      this.spawn();
    }, delay);
  }

  private finish(child: Subprocess | undefined): void {
    const running = child !== undefined && !this.down;
    const stopSignal = child?.signalCode === 'SIGTERM' || child?.signalCode === 'SIGINT';
    this.resolveEnded({
      description: !child ? 'never started' : running ? describeExit(child) : `stopped while down (last ${describeExit(child)})`,
      clean: child?.exitCode === 0 || !running || stopSignal,
      served: this.served,
    });
  }
}

function isRunning(child: Subprocess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

export function describeExit(child: Pick<Subprocess, 'exitCode' | 'signalCode'>): string {
  return child.signalCode ? `exited with signal ${child.signalCode}` : `exited with code ${child.exitCode}`;
}
