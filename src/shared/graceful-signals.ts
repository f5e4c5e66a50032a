/**
 * SIGTERM / SIGINT handling for the entry points (edge, shim). The first signal starts the graceful
 * shutdown and the process exits 0 when it is done (1 when it failed). Repeated signals are normal and
 * must not cut that shutdown short: Ctrl-C reaches every process of the terminal's group while
 * `bun run start` also sends its children a SIGTERM, and systemd signals the whole control group. So a
 * second signal is only logged; a third one forces an immediate exit (128 + the signal's number), for
 * an operator who wants the process gone now.
 *
 * @example
 * exitGracefullyOnSignals(() => server.shutdown(), log);
 */
import { constants } from 'node:os';
import { errorMessage } from './errors.ts';
import type { Logger } from './logger.ts';

/** Signals before the one that forces the exit. */
const FORCE_AT = 3;

export function exitGracefullyOnSignals(shutdown: () => Promise<void>, log: Logger, signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT']): void {
  let received = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    received++;
    if (received === 1) {
      log.info('signal received; shutting down', { signal });
      shutdown().then(
        () => process.exit(0),
        (e: unknown) => {
          log.error('shutdown failed', { error: errorMessage(e) });
          process.exit(1);
        },
      );
    } else if (received < FORCE_AT) {
      log.info('already shutting down; another signal forces the exit', { signal });
    } else {
      log.warn('forced exit before the shutdown finished', { signal });
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
  };
  for (const signal of signals) process.on(signal, onSignal);
}
