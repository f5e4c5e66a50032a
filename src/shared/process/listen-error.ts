/**
 * One message for a server that cannot take its port. Bun says "Failed to start server. Is port 8080 in
 * use?", grpc-js "No address added out of total 1 resolved errors: [listen EADDRINUSE ...]"; a user needs
 * to hear which port, whose, and what to do instead, in the same words from the edge and the shim.
 *
 * @example
 * try { server = Bun.serve({ port }); }
 * catch (e) { throw listenError(e, { what: "the edge's web page", host, port, flag: '--port', env: 'EDGE_PORT' }); }
 * // AppError('UNAVAILABLE', "port 8080 (the edge's web page) is already in use: stop the process that holds it, or choose another port with --port or EDGE_PORT (0 = any free port)")
 */
import { AppError, errorMessage } from '../errors.ts';

export interface ListenTarget {
  /** Whose port, e.g. "the shim's gRPC service". */
  what: string;
  host: string;
  port: number;
  /** The flag and the environment variable that choose the port. */
  flag: string;
  env: string;
}

export function listenError(e: unknown, target: ListenTarget): AppError {
  const { what, host, port, flag, env } = target;
  const raw = errorMessage(e);
  const code = (e as { code?: unknown } | null)?.code;
  if (code === 'EADDRINUSE' || /EADDRINUSE|address already in use|Is port \d+ in use/i.test(raw)) {
    return new AppError(
      'UNAVAILABLE',
      `port ${port} (${what}) is already in use: stop the process that holds it, or choose another port with ${flag} or ${env} (0 = any free port)`,
      {
        cause: e,
      },
    );
  }
  if (code === 'EACCES' || /EACCES|permission denied/i.test(raw)) {
    return new AppError('UNAVAILABLE', `port ${port} (${what}) needs privileges this process does not have: choose a port above 1023 with ${flag} or ${env}`, {
      cause: e,
    });
  }
  if (/EADDRNOTAVAIL|ENOTFOUND|EAI_/i.test(raw)) {
    return new AppError('UNAVAILABLE', `cannot listen on ${host}:${port} (${what}): ${host} is not an address of this machine`, { cause: e });
  }
  return new AppError('UNAVAILABLE', `cannot listen on ${host}:${port} (${what}): ${raw}`, { cause: e });
}
