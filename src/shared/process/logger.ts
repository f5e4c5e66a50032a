/**
 * Structured logs: one JSON object per line on stderr (`ts`, `level`, `component`, `msg`, fields), so
 * journald and log shippers can index them.
 *
 * @example
 * const log = createLogger('edge', 'info');
 * log.info('edge ready', { url });
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(component: string, level: string, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const threshold = RANK[level as LogLevel] ?? RANK.info;
  const emit =
    (lvl: Exclude<LogLevel, 'silent'>) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      if (RANK[lvl] < threshold) return;
      write(`${JSON.stringify({ ts: new Date().toISOString(), level: lvl, component, msg, ...fields })}\n`);
    };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** A logger that writes nothing (tests, benchmarks). */
export const silentLogger: Logger = createLogger('silent', 'silent', () => {});
