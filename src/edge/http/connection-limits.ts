/**
 * What keeps a LAN client from holding the edge's HTTP server open: wraps the app's `fetch` for
 * `Bun.serve`, which is given `idleTimeout: idleTimeoutS` alongside it.
 *
 * A request that needs the access token and lacks it is answered from its head, before a byte of its
 * body is read, and its connection closed: reading first would let anyone on the LAN hold one of
 * `maxOpenRequests` for as long as they trickle a body, and a few hundred of them took the edge offline.
 *
 * Bun's idle timeout alone closes a connection that sends nothing for that long while no request is in
 * progress (partial headers, an idle keep-alive connection), but it is one timer per connection that
 * received body bytes do not reset, so it would cut a slow upload that is still progressing, and a
 * generation that writes nothing while a slow cloud answers. Hence this small layer of our own:
 *
 * - a body is read here, chunk by chunk, with the idle timer reset by every chunk: an upload that stops
 *   for `idleTimeoutS` gets 408 and the connection is closed; one that keeps sending is never cut;
 * - while the app handles the request, Bun's timer is off (every handler ends: a generation is bounded
 *   by its token limit and the cloud's deadlines); a plain response puts it back for the keep-alive
 *   connection, and an event stream (text/event-stream) keeps it off until its end and closes the
 *   connection then (`Connection: close`), so that no idle connection is left without a timer;
 * - beyond `maxOpenRequests` requests in progress (streams included) a new one gets 503 with a message
 *   and its connection is closed. Bun counts requests, not connections: connections with no request in
 *   progress are bounded by the idle timeout instead;
 * - probes (`GET /healthz`, `/readyz`, `/metrics`, without a body) do not count against that bound: they
 *   have a budget of their own, `PROBE_BUDGET` at once, which requests in progress cannot use up. A box
 *   whose every slot holds an upload (with the token, or on an edge without one) still tells its health
 *   check and Prometheus that it serves. Each probe is answered at once from memory, so the budget is
 *   reached only by probes themselves.
 *
 * @example
 * const guard = guardConnections(app.fetch, { idleTimeoutS: 30, maxOpenRequests: 256, maxBodyBytes: 262144 });
 * Bun.serve({ port: 8080, idleTimeout: 30, fetch: guard });
 */
import type { Server } from 'bun';
import { requestHasAccessToken } from './access-token.ts';

export interface ConnectionLimits {
  /** Seconds a connection may stay silent (no request in progress, or an upload that stopped). */
  idleTimeoutS: number;
  /** Requests in progress at once, streams included; more are refused with 503. */
  maxOpenRequests: number;
  /** Bodies above this are not read here: the app refuses them with its own 413. */
  maxBodyBytes: number;
  /** The edge's access token, when it has one: a request without it is refused before its body is read. */
  accessToken?: string;
}

type Fetch = (request: Request, server: Server<undefined>) => Response | Promise<Response>;

/** The probes: what a load balancer, an orchestrator and Prometheus ask while the box is busy. */
const PROBE_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
/** Probes in progress at once, beside `maxOpenRequests`; a probe past it gets the same 503. */
const PROBE_BUDGET = 16;

function isProbe(request: Request): boolean {
  return (request.method === 'GET' || request.method === 'HEAD') && request.body === null && PROBE_PATHS.has(new URL(request.url).pathname);
}

/** A refusal at the transport level, before any route ran: JSON, and the connection closed after it. */
function refusal(status: number, code: string, message: string, extra: Record<string, string> = {}): Response {
  return Response.json({ error: { code, message } }, { status, headers: { connection: 'close', ...extra } });
}

export function guardConnections(fetch: Fetch, limits: ConnectionLimits): Fetch {
  let probes = 0;
  const tooMany = (what: string) => refusal(503, 'UNAVAILABLE', `the edge has ${what} in progress, its limit; try again shortly`, { 'retry-after': '1' });
  return async (received, server) => {
    const request = withAbsoluteUrl(received, server);
    if (isProbe(request)) {
      if (probes >= PROBE_BUDGET) return tooMany(`${PROBE_BUDGET} health and metrics requests`);
      probes++;
      try {
        return await fetch(request, server);
      } finally {
        probes--;
      }
    }
    // Probes in progress are among Bun's pending requests, but not among those this bound counts.
    if (server.pendingRequests - probes > limits.maxOpenRequests) return tooMany(`${limits.maxOpenRequests} requests`);
    if (request.body !== null && !requestHasAccessToken(request, limits.accessToken)) {
      // The app writes the 401 in its route's shape (JSON, OpenAI's, a page); it never sees the body.
      const headers = new Headers(request.headers);
      headers.delete('content-length');
      headers.delete('transfer-encoding');
      const response = await fetch(new Request(request.url, { method: request.method, headers, signal: request.signal }), server);
      response.headers.set('connection', 'close');
      return response;
    }
    server.timeout(received, 0);
    let forApp = request;
    if (request.body !== null && !declaredTooLarge(request, limits.maxBodyBytes)) {
      const body = await readProgressing(request.body, limits);
      if (body === 'stalled') {
        return refusal(408, 'DEADLINE_EXCEEDED', `the request body stopped arriving: no bytes for ${limits.idleTimeoutS} s`);
      }
      if (body === 'broken') return refusal(400, 'INVALID_ARGUMENT', 'the request body ended before its declared length');
      forApp = new Request(request.url, { method: request.method, headers: request.headers, body, signal: request.signal });
    }
    let response: Response;
    try {
      response = await fetch(forApp, server);
    } catch (e) {
      server.timeout(received, limits.idleTimeoutS);
      throw e;
    }
    if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
      response.headers.set('connection', 'close');
      return response;
    }
    server.timeout(received, limits.idleTimeoutS);
    return response;
  };
}

/**
 * The request with an absolute URL. Bun gives the bare path when the client sent no Host (HTTP/1.0 may
 * omit it, RFC 9112 § 3.2.2 allows it empty); every URL parser downstream needs the authority, which for
 * such a request is the server's own (RFC 9112 § 3.3).
 */
function withAbsoluteUrl(request: Request, server: Server<undefined>): Request {
  if (!request.url.startsWith('/')) return request;
  return new Request(new URL(request.url, `http://localhost:${server.port}`).href, request);
}

function declaredTooLarge(request: Request, maxBodyBytes: number): boolean {
  const length = Number(request.headers.get('content-length') ?? 0);
  return length > maxBodyBytes;
}

/**
 * The body's bytes, at most `maxBodyBytes + 1` of them (enough for the app's size check to refuse it),
 * 'stalled' when no chunk came for `idleTimeoutS`, 'broken' when the client closed half-way.
 */
async function readProgressing(body: ReadableStream<Uint8Array>, limits: ConnectionLimits): Promise<Uint8Array | 'stalled' | 'broken'> {
  const reader: BodyReader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size <= limits.maxBodyBytes) {
      const next = await readWithin(reader, limits.idleTimeoutS * 1000);
      if (next === 'stalled') return 'stalled';
      if (next.done || !next.value) break;
      chunks.push(next.value);
      size += next.value.byteLength;
    }
  } catch {
    return 'broken';
  } finally {
    reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks);
}

/** What this file uses of a body's reader (Bun's and Node's stream typings differ in the rest). */
interface BodyReader {
  read(): Promise<{ done: boolean; value?: Uint8Array }>;
  cancel(): Promise<void>;
}

async function readWithin(reader: BodyReader, ms: number): Promise<Awaited<ReturnType<BodyReader['read']>> | 'stalled'> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stalled = new Promise<'stalled'>((resolve) => (timer = setTimeout(() => resolve('stalled'), ms)));
  try {
    return await Promise.race([reader.read(), stalled]);
  } finally {
    clearTimeout(timer);
  }
}
