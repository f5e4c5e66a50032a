import { expect, test } from 'bun:test';
import { connect } from 'node:net';
import { startDelayProxyThread } from '../src/tools/delay-proxy/delay-proxy-thread.ts';

/**
 * A target in another process that answers each chunk with the wall-clock time it received it, so the
 * time a chunk crossed the proxy can be read while this thread was busy.
 */
async function stampingTarget(): Promise<{ port: number; kill(): void }> {
  const script = `
    const server = require('node:net').createServer((s) => s.on('data', () => s.write(String(performance.timeOrigin + performance.now()) + '\\n')));
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
  const child = Bun.spawn(['bun', '-e', script], { stdout: 'pipe', stderr: 'inherit' });
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  return { port: Number(new TextDecoder().decode(value).trim()), kill: () => child.kill() };
}

test('the proxy thread forwards on time while the thread that started it is blocked (as by an edge forward pass)', async () => {
  const target = await stampingTarget();
  const proxy = await startDelayProxyThread({ targetHost: '127.0.0.1', targetPort: target.port, delayMs: 40 });
  try {
    const socket = await new Promise<ReturnType<typeof connect>>((resolve, reject) => {
      const s = connect(proxy.port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    });
    const reply = new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    const sentAt = performance.timeOrigin + performance.now();
    socket.write('ping');
    // Hold this thread for 300 ms, as a synchronous onnxruntime run would. A write handed to the socket
    // leaves at once; a proxy on this thread could only forward it after the block.
    while (performance.timeOrigin + performance.now() < sentAt + 300);
    const receivedAt = Number(await reply);
    expect(receivedAt - sentAt).toBeGreaterThanOrEqual(39);
    expect(receivedAt - sentAt).toBeLessThan(250);
    socket.destroy();
  } finally {
    await proxy.close();
    target.kill();
  }
});

test('a target nobody listens on is not an error until dialed, and close ends the thread', async () => {
  const proxy = await startDelayProxyThread({ targetHost: '127.0.0.1', targetPort: 1, delayMs: 5 });
  expect(proxy.address).toBe(`127.0.0.1:${proxy.port}`);
  const closed = await new Promise<boolean>((resolve) => {
    const s = connect(proxy.port, '127.0.0.1');
    s.on('error', () => resolve(true));
    s.on('close', () => resolve(true));
  });
  expect(closed).toBe(true);
  await proxy.close();
  await proxy.close(); // twice is harmless
});

test("bad options are refused by the thread with the proxy's own message", async () => {
  await expect(startDelayProxyThread({ targetHost: '127.0.0.1', targetPort: 1, delayMs: -1 })).rejects.toThrow('delayMs must be a finite number ≥ 0, got -1');
});
