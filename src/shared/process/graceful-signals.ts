/**
 * SIGTERM / SIGINT handling for the entry points (edge, shim), installed before anything is loaded.
 *
 * A stop can come at any moment, also while the process is still loading its model: `bun run start`,
 * systemd and a terminal's Ctrl-C signal a process the moment they want it gone. So the entry point
 * installs these handlers first (its heavy modules are imported only afterwards), start-up checks
 * `signal` between its phases and gives back what it loaded when it fires, and once the process serves it
 * hands over its graceful shutdown. Whichever comes first, the process ends with exit code 0 and nothing
 * half-done.
 *
 * Each stop request counts once: the first stops, a second is only logged (the shutdown must not be cut
 * short), a third forces an immediate exit (128 + the signal's number) for an operator who wants the
 * process gone now. A process under a launcher (`bun run start`, which holds its IPC channel,
 * supervised-child.ts) takes its stop requests from the launcher alone, as StopRequest messages: a
 * terminal's Ctrl-C, and systemd's stop, signal every process of the group or unit, so the same request
 * would otherwise reach it twice (from the terminal and from the launcher) and log the first Ctrl-C as a
 * second one. Once the launcher is gone (the channel closed), signals count again.
 *
 * @example
 * const stop = handleStopSignals(createLogger('shim', 'info'));
 * const { startShim } = await import('../shim-server.ts'); // heavy imports after the handlers
 * const shim = await startShim(config, { signal: stop.signal });
 * stop.whenStopped(() => shim.shutdown());
 */
import { constants } from 'node:os';
import { AppError, errorMessage } from '../errors.ts';
import type { Logger } from './logger.ts';

/** Requests before the one that forces the exit. */
const FORCE_AT = 3;

/** What the first request logs, by where it came from and whether the process serves yet. */
const FIRST_REQUEST_LOG = {
  signal: { serving: 'signal received; shutting down', starting: 'signal received during start-up; stopping' },
  launcher: { serving: 'stopping', starting: 'stopping during start-up' },
} as const;

/** What a launcher sends the process it supervises, once per stop request; `signal` is the one it got. */
export interface StopRequest {
  type: 'stop';
  signal: NodeJS.Signals;
}

export function isStopRequest(message: unknown): message is StopRequest {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === 'stop' &&
    typeof (message as { signal?: unknown }).signal === 'string'
  );
}

/** The process as this module uses it (tests pass a stand-in). */
export interface StopHost {
  on(event: string, listener: (arg: unknown) => void): unknown;
  /** Whether a launcher holds this process's IPC channel. */
  readonly connected?: boolean;
  exit(code?: number): never;
}

export interface StopSignals {
  /** Aborts at the first request, with a CANCELLED AppError as its reason; start-up checks it. */
  readonly signal: AbortSignal;
  /** Replaces the logger (the entry point knows its log level only once its config is parsed). */
  useLogger(log: Logger): void;
  /**
   * The graceful shutdown of a process that is serving: runs at the first request, or at once when one
   * already came during start-up; then the process exits 0 (1 when the shutdown failed).
   */
  whenStopped(shutdown: () => Promise<void>): void;
  /** A request came: a start-up that failed since then failed because it was stopped (exit 0, not 1). */
  readonly requested: boolean;
}

export interface StopSignalsOptions {
  signals?: readonly NodeJS.Signals[];
  host?: StopHost;
}

export function handleStopSignals(initialLog: Logger, options: StopSignalsOptions = {}): StopSignals {
  const { signals = ['SIGTERM', 'SIGINT'], host = process as StopHost } = options;
  let log = initialLog;
  let received = 0;
  let shutdown: (() => Promise<void>) | undefined;
  const controller = new AbortController();

  const runShutdown = () => {
    shutdown!().then(
      () => host.exit(0),
      (e: unknown) => {
        log.error('shutdown failed', { error: errorMessage(e) });
        host.exit(1);
      },
    );
  };
  const onRequest = (signal: NodeJS.Signals, from: 'signal' | 'launcher') => {
    received++;
    if (received === 1) {
      log.info(FIRST_REQUEST_LOG[from][shutdown ? 'serving' : 'starting'], { signal, from });
      controller.abort(new AppError('CANCELLED', `stopped by ${signal} during start-up`));
      if (shutdown) runShutdown();
    } else if (received < FORCE_AT) {
      log.info('already shutting down; another signal forces the exit', { signal, from });
    } else {
      log.warn('forced exit before the shutdown finished', { signal, from });
      host.exit(128 + (constants.signals[signal] ?? 0));
    }
  };
  for (const name of signals) {
    host.on(name, () => {
      // The launcher got the same signal (or will get its own) and sends the request that counts.
      if (host.connected) log.debug('signal left to the launcher', { signal: name });
      else onRequest(name, 'signal');
    });
  }
  host.on('message', (message) => {
    if (isStopRequest(message)) onRequest(message.signal, 'launcher');
  });

  return {
    signal: controller.signal,
    useLogger: (next) => {
      log = next;
    },
    whenStopped: (fn) => {
      shutdown = fn;
      if (controller.signal.aborted) {
        log.info('stopping: the signal came while starting');
        runShutdown();
      }
    },
    get requested() {
      return controller.signal.aborted;
    },
  };
}
