/**
 * The worker behind prefaulted-buffers.ts: allocates the asked buffers, writes every one of them (so the
 * kernel maps and zeroes their pages here, on this thread), and transfers them back without a copy.
 */
declare const self: Worker;
export {}; // a module: its `self` does not clash with other worker scripts'

self.onmessage = (event: MessageEvent<{ id: number; elements: number; count: number }>) => {
  const { id, elements, count } = event.data;
  const buffers = Array.from({ length: count }, () => new Float32Array(elements).fill(0));
  self.postMessage({ id, buffers }, buffers.map((b) => b.buffer));
};
