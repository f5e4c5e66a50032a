/**
 * Errors in the shape OpenAI's API and its clients use: `{"error": {"message", "type", "param", "code"}}`.
 * The status comes from the system's one HTTP mapping (http-errors.ts); this file adds OpenAI's `type`
 * and `code` words, and `param` when a request field is at fault.
 *
 * @example
 * throw new OpenAIParamError('n', 'n must be 1: this edge generates one choice per request');
 * // → 400 {"error": {"message": "n must be 1: ...", "type": "invalid_request_error", "param": "n", "code": null}}
 */
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { AppError, errorMessage, isAppError, type ErrorCode } from '../../../shared/errors.ts';
import { httpStatus } from '../http-errors.ts';

/** An AppError about one request field, which OpenAI's error names in `param`. */
export class OpenAIParamError extends AppError {
  constructor(
    readonly param: string,
    message: string,
    code: ErrorCode = 'INVALID_ARGUMENT',
    /** OpenAI's machine-readable code, e.g. `model_not_found`. */
    readonly openaiCode: string | null = null,
  ) {
    super(code, message);
  }
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const TYPE: Partial<Record<ErrorCode, string>> = {
  INVALID_ARGUMENT: 'invalid_request_error',
  OUT_OF_RANGE: 'invalid_request_error',
  FAILED_PRECONDITION: 'invalid_request_error',
  NOT_FOUND: 'invalid_request_error',
  UNAUTHENTICATED: 'authentication_error',
  PERMISSION_DENIED: 'permission_error',
  RESOURCE_EXHAUSTED: 'rate_limit_error',
  UNAVAILABLE: 'service_unavailable_error',
  DEADLINE_EXCEEDED: 'timeout_error',
};

const CODE: Partial<Record<ErrorCode, string>> = {
  UNAUTHENTICATED: 'invalid_api_key',
  RESOURCE_EXHAUSTED: 'rate_limit_exceeded',
};

/** Anything thrown, as OpenAI's status and body. */
export function openAIError(e: unknown): { status: ContentfulStatusCode; body: OpenAIErrorBody } {
  if (!isAppError(e)) {
    return { status: 500, body: { error: { message: `internal error: ${errorMessage(e)}`, type: 'server_error', param: null, code: null } } };
  }
  const param = e instanceof OpenAIParamError ? e.param : null;
  const code = e instanceof OpenAIParamError && e.openaiCode !== null ? e.openaiCode : (CODE[e.code] ?? null);
  return { status: httpStatus(e.code), body: { error: { message: e.message, type: TYPE[e.code] ?? 'server_error', param, code } } };
}

/** A request body above the size limit (413, which has no error code of its own: gRPC calls it RESOURCE_EXHAUSTED too). */
export function bodyTooLarge(maxBytes: number): OpenAIErrorBody {
  return { error: { message: `request body is larger than ${maxBytes} bytes`, type: 'invalid_request_error', param: null, code: 'request_too_large' } };
}
