/**
 * Bearer-token checks: `authorization: Bearer <token>` in a gRPC call's metadata (the shim, the edge's
 * Generate service), compared in constant time; the edge's HTTP guard uses the same comparison. Anything
 * else is UNAUTHENTICATED.
 *
 * @example
 * checkBearer(call.metadata, config.authToken); // throws AppError('UNAUTHENTICATED', …) on a mismatch
 * metadata.set('authorization', bearer('s3cret'));
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';
import { AppError } from '../errors.ts';

export function bearer(token: string): string {
  return `Bearer ${token}`;
}

/**
 * Whether `presented` is `expected`, in time that depends on neither: both are hashed first, so even
 * their lengths stay private.
 */
export function sameToken(presented: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(presented), digest(expected));
}

/** No-op when `expected` is undefined (authentication off). */
export function checkBearer(metadata: Metadata, expected: string | undefined): void {
  if (expected === undefined) return;
  const values = metadata.get('authorization');
  if (values.length === 0) throw new AppError('UNAUTHENTICATED', 'missing bearer token (metadata "authorization: Bearer <token>")');
  const match = /^Bearer\s+(.+)$/i.exec(String(values[0]).trim());
  if (!match) throw new AppError('UNAUTHENTICATED', 'the authorization metadata is not a bearer token');
  if (!sameToken(match[1]!, expected)) throw new AppError('UNAUTHENTICATED', 'invalid bearer token');
}
