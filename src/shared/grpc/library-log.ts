/**
 * grpc-js writes its own errors to stderr as bare lines ("E No address added out of total 1 resolved"),
 * beside the process's JSON log. Every failure that matters to a user already reaches them through the
 * call or bind that failed, with a message of ours (listen-error.ts, the cloud client's fallback reasons),
 * so the library's lines go into the process's log at `debug`: there when asked for, not in a user's way.
 *
 * @example
 * routeGrpcLibraryLog(createLogger('shim', config.logLevel)); // once, in an entry point
 */
import { setLogger } from '@grpc/grpc-js';
import type { Logger } from '../process/logger.ts';

export function routeGrpcLibraryLog(log: Logger): void {
  const write = (...args: unknown[]) => log.debug('grpc-js', { message: args.map(String).join(' ') });
  setLogger({ error: write, info: write, debug: write });
}
