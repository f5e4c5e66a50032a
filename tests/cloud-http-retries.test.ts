/**
 * The HTTP backends' retries, counted on a raw TCP server: a connection that fails before any reply is
 * retried a limited number of times; an HTTP error reply is the server's answer and is never retried;
 * cancellation ends the wait between attempts.
 */
import { afterEach, expect, test } from 'bun:test';
import { createServer, type Server, type Socket } from 'node:net';
import { HttpBackendClient } from '../src/cloud/backends/http-backend-client.ts';

/** A loopback TCP server that answers connection number n (1-based) with `answer(n)`: a raw HTTP reply, or null to reset it. */
class CountingServer {
  connections = 0;
  private readonly server: Server;

  private constructor(answer: (n: number) => string | null) {
    this.server = createServer((socket: Socket) => {
      const reply = answer(++this.connections);
      if (reply === null) {
        socket.resetAndDestroy();
        return;
      }
      socket.once('data', () => socket.end(reply));
    });
  }

  static async start(answer: (n: number) => string | null): Promise<CountingServer> {
    const s = new CountingServer(answer);
    await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
    return s;
  }

  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('not listening');
    return `http://127.0.0.1:${address.port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function httpReply(status: number, body: unknown): string {
  const text = JSON.stringify(body);
  return `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`;
}

const servers: CountingServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(answer: (n: number) => string | null): Promise<CountingServer> {
  const s = await CountingServer.start(answer);
  servers.push(s);
  return s;
}

const client = (url: string, retries: number) => new HttpBackendClient({ name: 'sglang', baseUrl: url, apiKey: undefined, retries });

test('connections that fail are retried: the third attempt gets through', async () => {
  const server = await serve((n) => (n < 3 ? null : httpReply(200, { ok: n })));
  const response = await client(server.url, 2).post('/generate', { input_ids: [1] }, new AbortController().signal);
  expect(await response.json()).toEqual({ ok: 3 });
  expect(server.connections).toBe(3);
});

test('retries are limited: 1 + retries attempts, then UNAVAILABLE naming the address', async () => {
  const server = await serve(() => null);
  const error = await client(server.url, 2)
    .post('/generate', {}, new AbortController().signal)
    .catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'UNAVAILABLE' });
  expect((error as Error).message).toContain(`sglang: cannot reach ${server.url}/generate`);
  expect(server.connections).toBe(3);
});

test('an HTTP error reply is not retried', async () => {
  const server = await serve(() => httpReply(503, { object: 'error', message: 'Server overloaded', code: 503 }));
  const error = await client(server.url, 3)
    .post('/generate', {}, new AbortController().signal)
    .catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'UNAVAILABLE', message: 'sglang: HTTP 503: Server overloaded' });
  expect(server.connections).toBe(1);
});

test('cancelling during the wait between attempts stops the retries', async () => {
  const server = await serve(() => null);
  const controller = new AbortController();
  // The waits double from 50 ms; many retries would take seconds without the abort.
  const pending = client(server.url, 20).post('/generate', {}, controller.signal);
  while (server.connections < 2) await Bun.sleep(5);
  controller.abort();
  const error = await pending.catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'CANCELLED' });
  const seen = server.connections;
  await Bun.sleep(200);
  expect(server.connections).toBe(seen);
  expect(seen).toBeLessThan(4);
});
