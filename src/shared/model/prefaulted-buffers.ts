/**
 * Zeroed float32 buffers whose memory is already mapped, made on a worker thread. A fresh buffer of
 * megabytes costs its first writer a page fault per 4 KiB page, and a prompt cache of the Qwen2.5-0.5B
 * shape is dozens of such buffers (48 of 512 KiB at 950 positions): copied into fresh memory, the faults
 * cost many times the copy itself; into buffers a worker has written first, only the copy is left. So the
 * KV buffer pool asks here for a spare of each large size it had to allocate (kv-buffer-pool.ts), and the
 * faults happen off the decoding thread, while it runs the forward passes.
 *
 * One worker serves the process, started on first use and unreferenced, so it never keeps the process
 * alive. Where no worker can start, requests fail and the pool simply allocates as before.
 *
 * @example
 * const buffer = await prefaultedBuffer(131072); // 512 KiB of zeros, pages mapped
 */
let worker: Worker | undefined;
let nextId = 0;
const waiting = new Map<number, { resolve: (buffer: Float32Array) => void; reject: (error: Error) => void }>();

function theWorker(): Worker {
  if (worker) return worker;
  const started = new Worker(new URL('./prefault-worker.ts', import.meta.url).href);
  started.unref();
  started.onmessage = (event: MessageEvent<{ id: number; buffer: Float32Array }>) => {
    waiting.get(event.data.id)?.resolve(event.data.buffer);
    waiting.delete(event.data.id);
  };
  started.onerror = (event) => {
    for (const { reject } of waiting.values()) reject(new Error(`prefault worker failed: ${event.message}`));
    waiting.clear();
    worker = undefined;
  };
  worker = started;
  return started;
}

/** A buffer of `elements` zeros, made and written on the worker thread. */
export function prefaultedBuffer(elements: number): Promise<Float32Array> {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    waiting.set(id, { resolve, reject });
    try {
      theWorker().postMessage({ id, elements });
    } catch (e) {
      waiting.delete(id);
      reject(e instanceof Error ? e : new Error(String(e)));
    }
  });
}
