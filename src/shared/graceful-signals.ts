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
 * Repeated signals are normal and must not cut that shutdown short: Ctrl-C reaches every process of the
 * terminal's group while `bun run start` also sends its children a SIGTERM, and systemd signals the whole
 * control group. So a second signal is only logged; a third one forces an immediate exit (128 + the
 * signal's number), for an operator who wants the process gone now.
 *
 * @example
 * const stop = handleStopSignals(createLogger('shim', 'info'));
 * const { startShim } = await import('./shim-server.ts'); // heavy imports after the handlers
 * const shim = await startShim(config, { signal: stop.signal });
 * stop.whenStopped(() => shim.shutdown());
 */
import { constants } from 'node:os';
import { AppError, errorMessage } from './errors.ts';
import type { Logger } from './logger.ts';

/** Signals before the one that forces the exit. */
const FORCE_AT = 3;

export interface StopSignals {
  /** Aborts at the first signal, with a CANCELLED AppError as its reason; start-up checks it. */
  readonly signal: AbortSignal;
  /** Replaces the logger (the entry point knows its log level only once its config is parsed). */
  useLogger(log: Logger): void;
  /**
   * The graceful shutdown of a process that is serving: runs at the first signal, or at once when one
   * already came during start-up; then the process exits 0 (1 when the shutdown failed).
   */
  whenStopped(shutdown: () => Promise<void>): void;
  /** A signal came: a start-up that failed since then failed because it was stopped (exit 0, not 1). */
  readonly requested: boolean;
}

export function handleStopSignals(initialLog: Logger, signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT']): StopSignals {
  let log = initialLog;
  let received = 0;
  let shutdown: (() => Promise<void>) | undefined;
  const controller = new AbortController();

  const runShutdown = () => {
    shutdown!().then(
      () => process.exit(0),
      (e: unknown) => {
        log.error('shutdown failed', { error: errorMessage(e) });
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals) => {
    received++;
    if (received === 1) {
      log.info(shutdown ? 'signal received; shutting down' : 'signal received during start-up; stopping', { signal });
      controller.abort(new AppError('CANCELLED', `stopped by ${signal} during start-up`));
      if (shutdown) runShutdown();
    } else if (received < FORCE_AT) {
      log.info('already shutting down; another signal forces the exit', { signal });
    } else {
      log.warn('forced exit before the shutdown finished', { signal });
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
  };
  for (const signal of signals) process.on(signal, onSignal);

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
