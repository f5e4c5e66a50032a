/**
 * The one error type of the system. `code` names the kind of failure in gRPC's vocabulary, so the HTTP
 * and gRPC layers can each map it to a status in exactly one place.
 *
 * @example
 * throw new AppError('INVALID_ARGUMENT', 'threshold must be a number in [0, 1], got "abc"');
 */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'FAILED_PRECONDITION'
  | 'OUT_OF_RANGE'
  | 'RESOURCE_EXHAUSTED'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'UNAVAILABLE'
  | 'DEADLINE_EXCEEDED'
  | 'CANCELLED'
  | 'UNIMPLEMENTED'
  | 'INTERNAL';

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AppError';
  }
}

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}

/** The message of anything thrown, for logs and error events. */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** True for the errors an AbortSignal produces (`AbortError`, `TimeoutError`). */
export function isAbortError(e: unknown): boolean {
  return e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError');
}
