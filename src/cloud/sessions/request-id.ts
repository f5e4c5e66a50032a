/**
 * The one check of a caller's `request_id`, Route's `open` and Score alike: the shim logs it on one line with
 * every record of the call, so its length is bounded.
 *
 * @example
 * checkRequestId('gen-42'); // fine
 * checkRequestId('x'.repeat(201)); // AppError INVALID_ARGUMENT: request_id is longer than 200 characters
 */
import { AppError } from '../../shared/errors.ts';

export const MAX_REQUEST_ID_CHARS = 200;

export function checkRequestId(requestId: string): void {
  if (requestId.length > MAX_REQUEST_ID_CHARS) throw new AppError('INVALID_ARGUMENT', `request_id is longer than ${MAX_REQUEST_ID_CHARS} characters`);
}
