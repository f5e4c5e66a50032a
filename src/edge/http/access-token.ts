/**
 * Optional access control for the page and APIs on a shared LAN. With a token configured, a request
 * must carry it as `Authorization: Bearer <token>`, in the `edge_token` cookie, or once as `?token=`
 * (which sets the cookie, so a kiosk or a bookmarked link works). Health checks stay open.
 */
import type { MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { AppError } from '../../shared/errors.ts';
import { sameToken } from '../../shared/grpc/auth.ts';

const COOKIE = 'edge_token';

export function accessTokenGuard(token: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (!token) return next();
    const bearer = c.req.header('authorization')?.match(/^Bearer (.+)$/)?.[1];
    const query = c.req.query('token');
    const presented = bearer ?? getCookie(c, COOKIE) ?? query;
    if (presented === undefined || !sameToken(presented, token)) {
      throw new AppError('UNAUTHENTICATED', 'this edge requires an access token (Authorization: Bearer, or open the page with ?token=...)');
    }
    if (query !== undefined) setCookie(c, COOKIE, token, { httpOnly: true, sameSite: 'Strict', path: '/' });
    return next();
  };
}
