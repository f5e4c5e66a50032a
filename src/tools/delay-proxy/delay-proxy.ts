/**
 * A TCP proxy that holds back every chunk for a fixed time in each direction, so that a real connection
 * (here gRPC over HTTP/2 between the edge and the cloud shim) crosses a real network delay: a request
 * and its reply take at least 2 × `delayMs` on top of what they would take directly. Bytes are forwarded
 * unchanged and in order; an end of stream (FIN) travels behind the data before it, and an abrupt close
 * or error on one side destroys the other. Benchmarks only: it buffers without limit (no backpressure),
 * which is harmless for the few kilobytes a routed step exchanges.
 *
 * @example
 * const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: shim.port, delayMs: 85 });
 * const cloud = new GrpcCloudClient({ address: proxy.address }); // ≈ 170 ms round trip
 * try { ... } finally { await cloud.close(); await proxy.close(); }
 */
import { createConnection, createServer, type Socket } from 'node:net';

export interface DelayProxyOptions {
  targetHost: string;
  targetPort: number;
  /** One-way delay added to every chunk, in milliseconds (0 = forward at once). */
  delayMs: number;
  /** Address to listen on; loopback by default. The port is always chosen by the system. */
  host?: string;
}

export interface DelayProxy {
  readonly port: number;
  /** `host:port` to dial instead of the target. */
  readonly address: string;
  /** Client connections currently open through the proxy. */
  connections(): number;
  /** Stops listening and destroys every connection (pending delayed chunks are dropped). */
  close(): Promise<void>;
}

/** Forwards `from` → `to`, each chunk `delayMs` after it arrived; `end` follows the data queued before it. */
class DelayedPipe {
  private readonly queue: { due: number; chunk: Buffer | null }[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Whether the end of `from` has been seen (then its close is graceful, not a cut). */
  ended = false;

  constructor(
    from: Socket,
    private readonly to: Socket,
    private readonly delayMs: number,
  ) {
    from.on('data', (chunk: Buffer) => this.push(chunk));
    from.on('end', () => {
      this.ended = true;
      this.push(null);
    });
  }

  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private push(chunk: Buffer | null): void {
    if (this.delayMs === 0 && this.queue.length === 0) return this.deliver(chunk);
    this.queue.push({ due: performance.now() + this.delayMs, chunk });
    if (!this.timer) this.schedule();
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.flush(), Math.max(0, this.queue[0]!.due - performance.now()));
  }

  private flush(): void {
    this.timer = undefined;
    // A timer may fire a fraction of a millisecond early: chunks leave only once their delay has passed,
    // so the added delay is a lower bound the benchmarks can rely on.
    const now = performance.now();
    while (this.queue.length && this.queue[0]!.due <= now) this.deliver(this.queue.shift()!.chunk);
    if (this.queue.length) this.schedule();
  }

  private deliver(chunk: Buffer | null): void {
    if (this.to.destroyed) return;
    if (chunk === null) this.to.end();
    else this.to.write(chunk);
  }
}

export async function startDelayProxy(options: DelayProxyOptions): Promise<DelayProxy> {
  const { targetHost, targetPort, delayMs, host = '127.0.0.1' } = options;
  if (!(delayMs >= 0 && Number.isFinite(delayMs))) throw new RangeError(`delayMs must be a finite number ≥ 0, got ${delayMs}`);
  const open = new Set<{ client: Socket; upstream: Socket; pipes: DelayedPipe[] }>();

  const server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = createConnection({ host: targetHost, port: targetPort, allowHalfOpen: true });
    // Nagle's algorithm would add its own, unpredictable delay to small gRPC frames.
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const link = { client, upstream, pipes: [new DelayedPipe(client, upstream, delayMs), new DelayedPipe(upstream, client, delayMs)] };
    open.add(link);
    const teardown = () => {
      for (const p of link.pipes) p.cancel();
      client.destroy();
      upstream.destroy();
      open.delete(link);
    };
    // A side that closed after its end of stream lets the queued data and the end reach the other side
    // (the other side then closes in turn); one that was cut or failed takes the other down at once.
    let closedSides = 0;
    const onClose = (pipe: DelayedPipe) => () => {
      if (++closedSides === 2) open.delete(link);
      else if (!pipe.ended) teardown();
    };
    client.on('close', onClose(link.pipes[0]!));
    upstream.on('close', onClose(link.pipes[1]!));
    client.on('error', teardown);
    upstream.on('error', teardown);
  });

  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    });
  });

  return {
    port,
    address: `${host.includes(':') ? `[${host}]` : host}:${port}`,
    connections: () => open.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const link of [...open]) {
          for (const p of link.pipes) p.cancel();
          link.client.destroy();
          link.upstream.destroy();
        }
        open.clear();
        server.close(() => resolve());
      }),
  };
}
