/** The one mapping from the system's error codes to HTTP statuses. */
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ErrorCode } from '../../shared/errors.ts';

const STATUS: Record<ErrorCode, ContentfulStatusCode> = {
  INVALID_ARGUMENT: 400,
  OUT_OF_RANGE: 400,
  FAILED_PRECONDITION: 409,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  RESOURCE_EXHAUSTED: 429,
  CANCELLED: 499 as ContentfulStatusCode,
  UNIMPLEMENTED: 501 as ContentfulStatusCode,
  DEADLINE_EXCEEDED: 504,
  UNAVAILABLE: 503,
  INTERNAL: 500,
};

export function httpStatus(code: ErrorCode): ContentfulStatusCode {
  return STATUS[code];
}
