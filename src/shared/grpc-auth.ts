/**
 * Bearer-token checks for gRPC servers: `authorization: Bearer <token>` in the call's metadata, compared
 * in constant time. Anything else is UNAUTHENTICATED.
 *
 * @example
 * checkBearer(call.metadata, config.authToken); // throws AppError('UNAUTHENTICATED', …) on a mismatch
 * metadata.set('authorization', bearer('s3cret'));
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';
import { AppError } from './errors.ts';

export function bearer(token: string): string {
  return `Bearer ${token}`;
}

/** No-op when `expected` is undefined (authentication off). */
export function checkBearer(metadata: Metadata, expected: string | undefined): void {
  if (expected === undefined) return;
  const values = metadata.get('authorization');
  if (values.length === 0) throw new AppError('UNAUTHENTICATED', 'missing bearer token (metadata "authorization: Bearer <token>")');
  const match = /^Bearer\s+(.+)$/i.exec(String(values[0]).trim());
  if (!match) throw new AppError('UNAUTHENTICATED', 'the authorization metadata is not a bearer token');
  const digest = (s: string) => createHash('sha256').update(s).digest();
  if (!timingSafeEqual(digest(match[1]!), digest(expected))) throw new AppError('UNAUTHENTICATED', 'invalid bearer token');
}
