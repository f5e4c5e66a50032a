/**
 * The delay proxy on a thread of its own. An edge model's forward pass runs synchronously on the event
 * loop of the process that holds it (onnxruntime-node's `run`), so a proxy in that process could not
 * forward a chunk until the pass ends: the injected "network" would grow by up to a decode step whenever
 * the edge computes during a wait, which is exactly what speculative continuation does. A real network
 * does not wait for the edge's CPU; this proxy's timers run on their own thread, as a router's would.
 *
 * @example
 * const proxy = await startDelayProxyThread({ targetHost: '127.0.0.1', targetPort: shim.port, delayMs: 85 });
 * try { ... dial proxy.address ... } finally { await proxy.close(); }
 */
import type { DelayProxyOptions } from './delay-proxy.ts';

/** What the proxy thread says to the thread that started it. */
export type ProxyThreadMessage = { type: 'listening'; port: number; address: string } | { type: 'failed'; message: string } | { type: 'closed' };

export interface DelayProxyThread {
  readonly port: number;
  /** `host:port` to dial instead of the target. */
  readonly address: string;
  /** Stops the proxy (its connections are destroyed) and ends the thread. */
  close(): Promise<void>;
}

export async function startDelayProxyThread(options: DelayProxyOptions): Promise<DelayProxyThread> {
  const worker = new Worker(new URL('./delay-proxy-worker.ts', import.meta.url).href);
  const next = () =>
    new Promise<ProxyThreadMessage>((resolve, reject) => {
      const onMessage = (event: MessageEvent<ProxyThreadMessage>) => {
        worker.removeEventListener('error', onError);
        resolve(event.data);
      };
      const onError = (event: ErrorEvent) => {
        worker.removeEventListener('message', onMessage);
        reject(new Error(`delay proxy thread: ${event.message}`));
      };
      worker.addEventListener('message', onMessage, { once: true });
      worker.addEventListener('error', onError, { once: true });
    });
  const started = next();
  worker.postMessage(options);
  const reply = await started.catch((error: unknown) => {
    worker.terminate();
    throw error;
  });
  if (reply.type !== 'listening') {
    worker.terminate();
    throw new Error(reply.type === 'failed' ? reply.message : 'delay proxy thread closed before it listened');
  }
  let closing: Promise<void> | undefined;
  return {
    port: reply.port,
    address: reply.address,
    close: () =>
      (closing ??= (async () => {
        const closed = next();
        worker.postMessage('close');
        await closed.catch(() => undefined);
        worker.terminate();
      })()),
  };
}
