import { expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { startDelayProxy, type DelayProxy } from '../src/tools/delay-proxy/delay-proxy.ts';

const GREETING = Buffer.from('hello from the target\n');

/** A target that greets each client, echoes what it receives, and ends when the client ends. */
async function echoServer(): Promise<{ server: Server; port: number; sockets: Socket[]; received: Buffer[] }> {
  const sockets: Socket[] = [];
  const received: Buffer[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.write(GREETING);
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      socket.write(chunk);
    });
    socket.on('error', () => {});
  });
  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  return { server, port, sockets, received };
}

function dial(proxy: DelayProxy): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxy.port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Everything the socket receives until its end of stream. */
function readAll(socket: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  return new Promise((resolve, reject) => {
    socket.once('end', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
  });
}

const closed = (socket: Socket) => new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())));

for (const delayMs of [0, 5]) {
  test(`delay ${delayMs} ms: bytes arrive intact and in order both ways, and an end of stream travels through`, async () => {
    const target = await echoServer();
    const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: target.port, delayMs });
    try {
      const socket = await dial(proxy);
      const reply = readAll(socket);
      // Many writes of odd sizes, so that chunks are split and coalesced differently on each hop.
      const parts = Array.from({ length: 40 }, (_, i) => randomBytes(1 + ((i * 7919) % 9000)));
      for (const p of parts) socket.write(p);
      socket.end();
      const payload = Buffer.concat(parts);
      const back = await reply;
      expect(back.subarray(0, GREETING.length).equals(GREETING)).toBe(true);
      expect(back.subarray(GREETING.length).equals(payload)).toBe(true);
      expect(Buffer.concat(target.received).equals(payload)).toBe(true);
      await closed(socket);
    } finally {
      await proxy.close();
      target.server.close();
    }
  });
}

test('a connection cut on one side is cut on the other, in both directions', async () => {
  const target = await echoServer();
  const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: target.port, delayMs: 5 });
  try {
    // The target cuts: the client's connection closes.
    const first = await dial(proxy);
    first.on('error', () => {});
    first.write('ping');
    await new Promise<void>((resolve) => first.once('data', () => resolve()));
    target.sockets[0]!.destroy();
    await closed(first);

    // The client cuts: the target's connection closes.
    const second = await dial(proxy);
    second.write('ping');
    await new Promise<void>((resolve) => second.once('data', () => resolve()));
    const targetSide = target.sockets[1]!;
    second.destroy();
    await closed(targetSide);
    while (proxy.connections() > 0) await Bun.sleep(1);
    expect(proxy.connections()).toBe(0);
  } finally {
    await proxy.close();
    target.server.close();
  }
});

test('close() ends every open connection and stops listening; a dead target closes the client', async () => {
  const target = await echoServer();
  const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: target.port, delayMs: 5 });
  let socket: Socket | undefined;
  try {
    socket = await dial(proxy);
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket!.once('data', () => resolve()));
    expect(proxy.connections()).toBe(1);
  } finally {
    await proxy.close();
    target.server.close();
  }
  await closed(socket);
  expect(proxy.connections()).toBe(0);
  await expect(dial(proxy)).rejects.toThrow();

  // Nothing listens at the target any more: the proxy accepts, fails upstream, and closes the client.
  const orphan = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: target.port, delayMs: 0 });
  try {
    const client = await dial(orphan);
    client.on('error', () => {});
    await closed(client);
  } finally {
    await orphan.close();
  }
});

test('a negative delay is refused', async () => {
  await expect(startDelayProxy({ targetHost: '127.0.0.1', targetPort: 1, delayMs: -1 })).rejects.toThrow(RangeError);
});
