/**
 * Optional access control for the page and APIs on a shared LAN. With a token configured, a request
 * must carry it as `Authorization: Bearer <token>` (the scheme in any case, as RFC 7235 says), in the
 * `edge_token` cookie, or once as `?token=` (which sets the cookie, so a kiosk or a bookmarked link
 * works). What a request presents explicitly wins over the cookie: a `?token=` link must log a browser
 * in again even when it still holds a stale cookie from an earlier token. Health checks stay open.
 *
 * @example
 * app.use('*', accessTokenGuard(config.accessToken)); // throws AppError('UNAUTHENTICATED', …) without it
 */
import type { MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { AppError } from '../../shared/errors.ts';
import { sameToken } from '../../shared/grpc/auth.ts';

const COOKIE = 'edge_token';
/** RFC 7235: the scheme is case-insensitive and followed by one or more spaces. */
const BEARER = /^bearer +(\S+) *$/i;

export function accessTokenGuard(token: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (!token) return next();
    const header = c.req.header('authorization');
    const bearer = header === undefined ? undefined : (BEARER.exec(header)?.[1] ?? '');
    const query = c.req.query('token');
    const presented = bearer ?? query ?? getCookie(c, COOKIE);
    if (presented === undefined || !sameToken(presented, token)) {
      throw new AppError('UNAUTHENTICATED', 'this edge requires an access token (Authorization: Bearer, or open the page with ?token=...)');
    }
    if (query !== undefined && bearer === undefined) setCookie(c, COOKIE, token, { httpOnly: true, sameSite: 'Strict', path: '/' });
    return next();
  };
}
