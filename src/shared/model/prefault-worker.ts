/**
 * The worker behind prefaulted-buffers.ts: allocates the asked buffer, writes it (so the kernel maps and
 * zeroes its pages here, on this thread), and transfers it back without a copy.
 */
declare const self: Worker;
export {}; // a module: its `self` does not clash with other worker scripts'

self.onmessage = (event: MessageEvent<{ id: number; elements: number }>) => {
  const { id, elements } = event.data;
  const buffer = new Float32Array(elements).fill(0);
  self.postMessage({ id, buffer }, [buffer.buffer]);
};
