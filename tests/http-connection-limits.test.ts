/**
 * The edge's HTTP server against clients that hold connections open (issue 29, item 2), over real
 * sockets on loopback: a few hundred connections stuck in their headers, in their bodies, or idle after
 * a keep-alive request are closed within the idle timeout while /healthz and a generation are served;
 * a slow upload that keeps sending and an event stream that stays silent for longer than the timeout are
 * not cut; past the bound on requests in progress a request gets 503 with a message and is closed, while
 * the probes (/healthz, /readyz, /metrics), which have a budget of their own, still answer.
 * Timeouts are short here (2 s); Bun's connection timer is coarse (seconds), hence the margins.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, type Socket } from 'node:net';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { guardConnections } from '../src/edge/http/connection-limits.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const IDLE_S = 2;
/** Bun rounds its connection timer up to a few seconds; a stuck connection must be gone well before this. */
const CLOSED_WITHIN_MS = 16_000;

/** A raw TCP connection that records what it received and when it closed. */
interface RawConnection {
  socket: Socket;
  received: () => string;
  closed: Promise<number>;
}

function rawConnection(port: number, first: string): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const opened = Date.now();
    let text = '';
    const socket = connect(port, '127.0.0.1');
    const closed = new Promise<number>((done) => socket.on('close', () => done(Date.now() - opened)));
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', () => {});
    socket.once('connect', () => {
      socket.write(first);
      resolve({ socket, received: () => text, closed });
    });
    socket.once('error', reject);
  });
}

async function waitUntil(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

const GENERATE_BODY = JSON.stringify({ prompt: 'Once upon a time', mode: 'small_only', max_new_tokens: 3 });

async function generate(url: string): Promise<string[]> {
  const res = await fetch(`${url}api/generate`, { method: 'POST', body: GENERATE_BODY, headers: { 'content-type': 'application/json' } });
  expect(res.status).toBe(200);
  return [...(await res.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]!);
}

async function startTestEdgeServer(flags: string[]): Promise<RunningEdge> {
  const demo = await ensureDemoPacks();
  const base = [
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--grpc-port',
    'off',
    '--cloud',
    'none',
    '--log-level',
    'error',
    '--edge-model',
    demo.edgePack,
    '--router',
    demo.routerPack,
  ];
  return startEdge(parseEdgeConfig([...base, '--idle-timeout', String(IDLE_S), ...flags], {}));
}

describe('stuck connections', () => {
  let edge: RunningEdge;
  let port: number;
  beforeAll(async () => {
    edge = await startTestEdgeServer(['--max-open-requests', '1000']);
    port = Number(new URL(edge.url).port);
  }, 60_000);
  afterAll(() => edge?.stop());

  test('300 stuck connections are closed within the timeout; /healthz, a generation and a slow upload are served meanwhile', async () => {
    const partialHeaders = await Promise.all(Array.from({ length: 100 }, () => rawConnection(port, 'GET /healthz HTTP/1.1\r\nHost: edge\r\n')));
    const partialBodies = await Promise.all(
      Array.from({ length: 100 }, () =>
        rawConnection(port, 'POST /api/generate HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"pro'),
      ),
    );
    const keepAlive = await Promise.all(Array.from({ length: 100 }, () => rawConnection(port, 'GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n')));
    await waitUntil(() => keepAlive.every((c) => c.received().includes('{"status":"ok"}')), 10_000, 'the keep-alive requests to be answered');

    // A slow upload that keeps sending (a few bytes every 0.6 s, for longer than the stuck ones last).
    const upload = await rawConnection(
      port,
      `POST /api/generate HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: ${GENERATE_BODY.length}\r\n\r\n`,
    );
    const sending = (async () => {
      for (let at = 0; at < GENERATE_BODY.length; at += 4) {
        upload.socket.write(GENERATE_BODY.slice(at, at + 4));
        await Bun.sleep(600);
      }
    })();

    // Served while all of that is open.
    expect((await fetch(`${edge.url}healthz`)).status).toBe(200);
    expect(await generate(edge.url)).toEqual(['token', 'token', 'token', 'done']);

    const stuck = [...partialHeaders, ...partialBodies, ...keepAlive];
    const lifetimes = await Promise.all(stuck.map((c) => Promise.race([c.closed, Bun.sleep(CLOSED_WITHIN_MS + 1_000).then(() => Infinity)])));
    expect(lifetimes.filter((ms) => ms > CLOSED_WITHIN_MS)).toEqual([]);
    // Each stuck body was answered before its connection closed.
    for (const c of partialBodies) expect(c.received()).toStartWith('HTTP/1.1 408');
    expect(partialBodies[0]!.received()).toContain(`the request body stopped arriving: no bytes for ${IDLE_S} s`);

    await sending;
    await waitUntil(() => upload.received().includes('event: done'), 10_000, 'the slow upload to be generated from');
    expect(upload.received()).toStartWith('HTTP/1.1 200');
    expect([...upload.received().matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['token', 'token', 'token', 'done']);
    // An event stream closes its connection at its end: no keep-alive connection is left without a timer.
    expect(await upload.closed).toBeGreaterThan(0);
    expect((await fetch(`${edge.url}healthz`)).status).toBe(200);
  }, 60_000);
  test("a method the edge serves nowhere gets 501; a request line Bun's parser refuses (BREW, a lowercase get) is closed without a reply, before the app sees it, and the edge stays healthy (issue 54, item 7h)", async () => {
    const propfind = await rawConnection(port, 'PROPFIND /api/generate HTTP/1.1\r\nHost: edge\r\n\r\n');
    await waitUntil(() => propfind.received().includes('PROPFIND"}'), 5_000, 'the PROPFIND to be answered');
    expect(propfind.received()).toStartWith('HTTP/1.1 501');
    expect(propfind.received()).toContain('{"error":{"code":"UNIMPLEMENTED","message":"the edge serves GET, HEAD and POST, not PROPFIND"}}');
    propfind.socket.destroy();
    // Bun's HTTP parser closes these itself: no reply can be written, so what is pinned is the close and the edge's health after it.
    for (const line of ['BREW /api/generate HTTP/1.1', 'get /healthz HTTP/1.1', 'Post /api/generate HTTP/1.1']) {
      const refused = await rawConnection(port, `${line}\r\nHost: edge\r\n\r\n`);
      const lifetime = await Promise.race([refused.closed, Bun.sleep(5_000).then(() => Infinity)]);
      expect({ line, reply: refused.received(), closed: lifetime < 5_000 }).toEqual({ line, reply: '', closed: true });
    }
    expect((await fetch(`${edge.url}healthz`)).status).toBe(200);
    expect(await generate(edge.url)).toEqual(['token', 'token', 'token', 'done']);
  }, 30_000);
});

describe('the bound on requests in progress', () => {
  const TOKEN = 'bound-test-token';
  const auth = `Authorization: Bearer ${TOKEN}\r\n`;
  let edge: RunningEdge;
  let port: number;
  beforeAll(async () => {
    edge = await startTestEdgeServer(['--max-open-requests', '20', '--access-token', TOKEN]);
    port = Number(new URL(edge.url).port);
  }, 60_000);
  afterAll(() => edge?.stop());

  test('20 slow uploads with the token fill it: a new generation gets 503 with a message and is closed, while /healthz, /readyz and /metrics answer 200 (issue 54, item 5); served again once the uploads are gone', async () => {
    const uploads = await Promise.all(
      Array.from({ length: 20 }, () =>
        rawConnection(port, `POST /api/generate HTTP/1.1\r\nHost: edge\r\n${auth}Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"prompt":"`),
      ),
    );
    // Each keeps sending a byte now and then, so none is cut as stalled while the checks run.
    let trickling = true;
    const trickle = (async () => {
      while (trickling) {
        for (const u of uploads) if (!u.socket.destroyed) u.socket.write('a');
        await Bun.sleep(500);
      }
    })();
    try {
      await Bun.sleep(300);
      const refused = await rawConnection(
        port,
        `POST /api/generate HTTP/1.1\r\nHost: edge\r\n${auth}Content-Type: application/json\r\nContent-Length: ${GENERATE_BODY.length}\r\n\r\n${GENERATE_BODY}`,
      );
      expect(await Promise.race([refused.closed, Bun.sleep(5_000).then(() => Infinity)])).toBeLessThan(5_000);
      expect(refused.received()).toStartWith('HTTP/1.1 503');
      expect(refused.received()).toContain('"message":"the edge has 20 requests in progress, its limit; try again shortly"');

      const probes = await Promise.all(
        ['/healthz', '/readyz', '/metrics'].map(async (path) => {
          const res = await fetch(`${edge.url}${path.slice(1)}`, { headers: { authorization: `Bearer ${TOKEN}` } });
          return { path, status: res.status, body: (await res.text()).slice(0, 40) };
        }),
      );
      expect(probes.map(({ path, status }) => ({ path, status }))).toEqual(['/healthz', '/readyz', '/metrics'].map((path) => ({ path, status: 200 })));
      expect(probes[0]!.body).toBe('{"status":"ok"}');
      expect(uploads.every((u) => !u.socket.destroyed && u.received() === '')).toBe(true);
    } finally {
      trickling = false;
      await trickle;
      for (const u of uploads) u.socket.destroy();
    }
    await Bun.sleep(300);
    const res = await fetch(`${edge.url}api/generate`, {
      method: 'POST',
      body: GENERATE_BODY,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    expect([...(await res.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['token', 'token', 'token', 'done']);
  }, 60_000);
});

describe('an event stream', () => {
  test('silent for three times the idle timeout is not cut, and closes its connection at its end', async () => {
    const silentStream = () =>
      new Response(
        new ReadableStream({
          async start(controller) {
            controller.enqueue(new TextEncoder().encode('event: token\ndata: 1\n\n'));
            await Bun.sleep(3 * IDLE_S * 1000);
            controller.enqueue(new TextEncoder().encode('event: done\ndata: 2\n\n'));
            controller.close();
          },
        }),
        { headers: { 'content-type': 'text/event-stream' } },
      );
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      idleTimeout: IDLE_S,
      fetch: guardConnections(silentStream, { idleTimeoutS: IDLE_S, maxOpenRequests: 10, maxBodyBytes: 1024 }),
    });
    try {
      const stream = await rawConnection(server.port!, 'GET /events HTTP/1.1\r\nHost: edge\r\n\r\n');
      const lifetime = await stream.closed;
      expect(stream.received()).toContain('event: done');
      expect(stream.received().toLowerCase()).toContain('connection: close');
      expect(lifetime).toBeGreaterThanOrEqual(3 * IDLE_S * 1000);
    } finally {
      await server.stop(true);
    }
  }, 30_000);
});

describe('unauthenticated slow uploads (issue 45, item 1)', () => {
  const TOKEN = 'lan-secret-token';
  let edge: RunningEdge;
  let port: number;
  beforeAll(async () => {
    // The shipped bound (256): 270 trickling uploads would have held every slot before the token was checked.
    edge = await startTestEdgeServer(['--max-open-requests', '256', '--access-token', TOKEN]);
    port = Number(new URL(edge.url).port);
  }, 60_000);
  afterAll(() => edge?.stop());

  test('270 uploads that trickle a body without the token each get 401 within 5 s of their headers; /healthz and an authenticated generation are served meanwhile', async () => {
    const paths = ['/api/generate', '/v1/completions', '/runs'];
    const uploads = await Promise.all(
      Array.from({ length: 270 }, (_, i) =>
        rawConnection(
          port,
          `POST ${paths[i % paths.length]} HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"prompt":"`,
        ),
      ),
    );
    const headersSentAt = Date.now();
    let trickling = true;
    const trickle = (async () => {
      while (trickling) {
        for (const u of uploads) if (!u.socket.destroyed) u.socket.write('a');
        await Bun.sleep(500);
      }
    })();
    try {
      await waitUntil(() => uploads.every((u) => u.received().startsWith('HTTP/1.1 401')), 5_000, 'every upload to be answered 401');
      expect(Date.now() - headersSentAt).toBeLessThan(5_000);
      // Each refusal speaks its route's language, and says what is missing.
      expect(uploads[0]!.received()).toContain('this edge requires an access token');
      expect(uploads[1]!.received()).toContain('"type":"authentication_error"');
      expect(uploads.every((u) => /connection: close/i.test(u.received()))).toBe(true);

      const health = await fetch(`${edge.url}healthz`);
      expect(health.status).toBe(200);
      const res = await fetch(`${edge.url}api/generate`, {
        method: 'POST',
        body: GENERATE_BODY,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status).toBe(200);
      expect([...(await res.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['token', 'token', 'token', 'done']);
      // The refused connections are closed by the edge, not left to the client.
      const lifetimes = await Promise.all(uploads.map((u) => Promise.race([u.closed, Bun.sleep(5_000).then(() => Infinity)])));
      expect(lifetimes.filter((ms) => ms === Infinity)).toEqual([]);
    } finally {
      trickling = false;
      await trickle;
      for (const u of uploads) u.socket.destroy();
    }
  }, 60_000);

  test('a request without a Host (HTTP/1.0) or with an empty one is routed like any other: /healthz 200, the API 401 (issue 45, item 7)', async () => {
    const cases: [string, string][] = [
      ['GET /healthz HTTP/1.0\r\n\r\n', 'HTTP/1.1 200'],
      ['GET /healthz HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n', 'HTTP/1.1 200'],
      ['GET /api/info HTTP/1.0\r\n\r\n', 'HTTP/1.1 401'],
      [`GET /api/info HTTP/1.0\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`, 'HTTP/1.1 200'],
    ];
    for (const [request, status] of cases) {
      const c = await rawConnection(port, request);
      await Promise.race([c.closed, Bun.sleep(5_000)]);
      expect({ request, reply: c.received().slice(0, status.length) }).toEqual({ request, reply: status });
      c.socket.destroy();
    }
  }, 30_000);

  test('an upload with the token (bearer, or the cookie a page login sets) is read and served', async () => {
    for (const credential of [`Authorization: Bearer ${TOKEN}`, `Cookie: edge_token=${TOKEN}`]) {
      const upload = await rawConnection(
        port,
        `POST /api/generate HTTP/1.1\r\nHost: edge\r\n${credential}\r\nContent-Type: application/json\r\nContent-Length: ${GENERATE_BODY.length}\r\n\r\n`,
      );
      for (let at = 0; at < GENERATE_BODY.length; at += 16) {
        upload.socket.write(GENERATE_BODY.slice(at, at + 16));
        await Bun.sleep(50);
      }
      await waitUntil(() => upload.received().includes('event: done'), 10_000, 'the authenticated upload to be generated from');
      expect(upload.received()).toStartWith('HTTP/1.1 200');
      upload.socket.destroy();
    }
  }, 30_000);
});
