/**
 * The one place where AppError codes and gRPC statuses meet. Servers turn whatever they caught into a
 * status with `toGrpcStatus`; clients turn a failed call back into an AppError with `fromGrpcError`.
 *
 * @example
 * call.emit('error', toGrpcStatus(new AppError('FAILED_PRECONDITION', 'gap in context ids')));
 * catch (e) { throw fromGrpcError(e); } // AppError('FAILED_PRECONDITION', 'gap in context ids')
 */
import { Metadata, status as Status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { AppError, errorMessage, isAbortError, type ErrorCode } from '../errors.ts';

const TO_GRPC: Record<ErrorCode, Status> = {
  INVALID_ARGUMENT: Status.INVALID_ARGUMENT,
  NOT_FOUND: Status.NOT_FOUND,
  ALREADY_EXISTS: Status.ALREADY_EXISTS,
  FAILED_PRECONDITION: Status.FAILED_PRECONDITION,
  OUT_OF_RANGE: Status.OUT_OF_RANGE,
  RESOURCE_EXHAUSTED: Status.RESOURCE_EXHAUSTED,
  UNAUTHENTICATED: Status.UNAUTHENTICATED,
  PERMISSION_DENIED: Status.PERMISSION_DENIED,
  UNAVAILABLE: Status.UNAVAILABLE,
  DEADLINE_EXCEEDED: Status.DEADLINE_EXCEEDED,
  CANCELLED: Status.CANCELLED,
  UNIMPLEMENTED: Status.UNIMPLEMENTED,
  INTERNAL: Status.INTERNAL,
};

/** gRPC statuses without an AppError twin land on the nearest kind. */
const FROM_GRPC: Record<Status, ErrorCode> = {
  [Status.OK]: 'INTERNAL',
  [Status.CANCELLED]: 'CANCELLED',
  [Status.UNKNOWN]: 'INTERNAL',
  [Status.INVALID_ARGUMENT]: 'INVALID_ARGUMENT',
  [Status.DEADLINE_EXCEEDED]: 'DEADLINE_EXCEEDED',
  [Status.NOT_FOUND]: 'NOT_FOUND',
  [Status.ALREADY_EXISTS]: 'ALREADY_EXISTS',
  [Status.PERMISSION_DENIED]: 'PERMISSION_DENIED',
  [Status.RESOURCE_EXHAUSTED]: 'RESOURCE_EXHAUSTED',
  [Status.FAILED_PRECONDITION]: 'FAILED_PRECONDITION',
  [Status.ABORTED]: 'UNAVAILABLE',
  [Status.OUT_OF_RANGE]: 'OUT_OF_RANGE',
  [Status.UNIMPLEMENTED]: 'UNIMPLEMENTED',
  [Status.INTERNAL]: 'INTERNAL',
  [Status.UNAVAILABLE]: 'UNAVAILABLE',
  [Status.DATA_LOSS]: 'INTERNAL',
  [Status.UNAUTHENTICATED]: 'UNAUTHENTICATED',
};

/** Trailer that carries the AppError code as text, for peers that want it without a table. */
export const ERROR_CODE_TRAILER = 'app-error-code';

/** Anything thrown → AppError: abort errors become CANCELLED (or their AppError reason), the rest INTERNAL. */
export function toAppError(e: unknown): AppError {
  if (e instanceof AppError) return e;
  if (isServiceError(e)) return fromGrpcError(e);
  if (isAbortError(e)) return new AppError(e instanceof Error && e.name === 'TimeoutError' ? 'DEADLINE_EXCEEDED' : 'CANCELLED', errorMessage(e), { cause: e });
  return new AppError('INTERNAL', errorMessage(e), { cause: e });
}

export function grpcCode(code: ErrorCode): Status {
  return TO_GRPC[code];
}

export function appErrorCode(code: number): ErrorCode {
  return FROM_GRPC[code as Status] ?? 'INTERNAL';
}

/** The status a server sends for `e` (a `ServiceError`-shaped object `call.emit('error', …)` accepts). */
export function toGrpcStatus(e: unknown): Partial<StatusObject> & { code: Status; details: string; metadata: Metadata } {
  const err = toAppError(e);
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_TRAILER, err.code);
  return { code: TO_GRPC[err.code], details: err.message, metadata };
}

export function isServiceError(e: unknown): e is ServiceError {
  return e instanceof Error && typeof (e as Partial<ServiceError>).code === 'number' && 'details' in e;
}

/** A failed call's status (or a ServiceError) → AppError with the mapped code and the server's message. */
export function fromGrpcError(e: Pick<StatusObject, 'code' | 'details'> | ServiceError): AppError {
  return new AppError(appErrorCode(e.code), e.details || `gRPC status ${Status[e.code] ?? e.code}`, { cause: e });
}
