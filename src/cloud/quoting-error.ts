/**
 * The shim's log carries no request content: no prompt or reply text, no token ids, only lengths, counts
 * and codes. Errors are where content slips in (a backend's error body that echoes the prompt, a malformed
 * reply quoted for diagnosis, an id outside the vocabulary), so an error whose message quotes content is a
 * QuotingError: the edge that sent the request gets the whole message (the text is its own), and the shim's
 * log writes `unquoted` instead, unless the shim runs with `--log-text`.
 *
 * @example
 * throw new QuotingError('INTERNAL', `sglang: reply is not JSON: ${text.slice(0, 200)}`, `sglang: reply is not JSON (${text.length} characters)`);
 * log.error('session failed', { error: loggableMessage(error, config.logText) });
 */
import { AppError, type ErrorCode } from '../shared/errors.ts';

export class QuotingError extends AppError {
  constructor(
    code: ErrorCode,
    message: string,
    /** The message less what it quotes: what the log writes by default. */
    readonly unquoted: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** What the shim's log may say of `error`: its message, less what it quotes unless `logText`. */
export function loggableMessage(error: AppError, logText: boolean): string {
  return !logText && error instanceof QuotingError ? error.unquoted : error.message;
}
