/** The shim's logger: one JSON line per event on stderr, filtered by the configured level. */
export type LogLevel = 'silent' | 'error' | 'info' | 'debug';
export type Log = (level: Exclude<LogLevel, 'silent'>, message: string, fields?: Record<string, unknown>) => void;

const RANK: Record<LogLevel, number> = { silent: 0, error: 1, info: 2, debug: 3 };

export function createLog(level: LogLevel, write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Log {
  return (at, message, fields) => {
    if (RANK[at] > RANK[level]) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: at, message, ...fields }));
  };
}

export const silentLog: Log = () => {};
