/**
 * Optional access control for the page and APIs on a shared LAN. With a token configured, a request
 * must carry it as `Authorization: Bearer <token>` (the scheme in any case, as RFC 7235 says), in the
 * `edge_token` cookie, or once as `?token=` (which sets the cookie, so a kiosk or a bookmarked link
 * works). What a request presents explicitly wins over the cookie: a `?token=` link must log a browser
 * in again even when it still holds a stale cookie from an earlier token. A browser that logs in with
 * `?token=` is sent on to the same address without it, so the token leaves the address bar and history.
 * Health checks stay open.
 *
 * @example
 * app.use('*', accessTokenGuard(config.accessToken)); // throws AppError('UNAUTHENTICATED', …) without it
 * hasAccessToken(c, config.accessToken); // true without a token configured
 */
import type { Context, MiddlewareHandler } from 'hono';
import { setCookie } from 'hono/cookie';
import { parse as parseCookies } from 'hono/utils/cookie';
import { AppError } from '../../shared/errors.ts';
import { sameToken } from '../../shared/grpc/auth.ts';

const COOKIE = 'edge_token';
/** RFC 7235: the scheme is case-insensitive and followed by one or more spaces. */
const BEARER = /^bearer +(\S+) *$/i;
/** What every 401 says it wants (RFC 7235), the OpenAI API's included. */
export const AUTHENTICATE_CHALLENGE = 'Bearer realm="edge"';

/**
 * The credentials a request presents: a bearer header ('' when malformed), a `?token=`, a cookie. Read
 * from the request's head alone, so the transport can check them before it reads a body.
 */
function presented(request: Request): { bearer: string | undefined; query: string | undefined; cookie: string | undefined } {
  const header = request.headers.get('authorization') ?? undefined;
  const cookies = request.headers.get('cookie');
  return {
    bearer: header === undefined ? undefined : (BEARER.exec(header)?.[1] ?? ''),
    query: new URL(request.url).searchParams.get('token') ?? undefined,
    cookie: cookies === null ? undefined : parseCookies(cookies, COOKIE)[COOKIE],
  };
}

/** Whether the request carries the edge's token; always true when none is configured. */
export function requestHasAccessToken(request: Request, token: string | undefined): boolean {
  if (!token) return true;
  const { bearer, query, cookie } = presented(request);
  const shown = bearer ?? query ?? cookie;
  return shown !== undefined && sameToken(shown, token);
}

export function hasAccessToken(c: Context, token: string | undefined): boolean {
  return requestHasAccessToken(c.req.raw, token);
}

export function accessTokenGuard(token: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (!token) return next();
    if (!hasAccessToken(c, token)) {
      throw new AppError('UNAUTHENTICATED', 'this edge requires an access token (Authorization: Bearer, or open the page with ?token=...)');
    }
    const { bearer, query } = presented(c.req.raw);
    if (query === undefined || bearer !== undefined) return next();
    setCookie(c, COOKIE, token, { httpOnly: true, sameSite: 'Strict', path: '/' });
    // A browser's navigation (it asks for HTML) goes on without the token; a program asking for data gets it at once.
    if (c.req.method === 'GET' && (c.req.header('accept') ?? '').includes('text/html')) {
      const url = new URL(c.req.url);
      url.searchParams.delete('token');
      return c.redirect(`${pathOnThisBox(url.pathname)}${url.search}`, 303);
    }
    return next();
  };
}

/**
 * A path that a browser resolves on this box: `//evil.example/` or `/\evil.example` in a Location header is
 * another host (a scheme-relative address; browsers read `\` as `/`), so a run of leading slashes and
 * backslashes becomes one slash.
 */
export function pathOnThisBox(path: string): string {
  return path.replace(/^[/\\]+/, '/');
}
