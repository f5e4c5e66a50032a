/**
 * One thread of the copy-bandwidth measurement (see bench-decode-bandwidth.ts): allocates and touches
 * its own buffers, says it is ready, waits for the common start, times its copies and reports.
 */
declare const self: Worker;

interface CopyJob {
  bytes: number;
  repeats: number;
  /** Int32 flag: 0 = wait, 1 = go. */
  start: SharedArrayBuffer;
}

self.onmessage = (event: MessageEvent<CopyJob>) => {
  const { bytes, repeats, start } = event.data;
  const src = new Float32Array(bytes / 4).fill(1);
  const dst = new Float32Array(bytes / 4);
  dst.set(src); // touches every page of both before timing
  postMessage({ ready: true });
  Atomics.wait(new Int32Array(start), 0, 0);
  const t = performance.now();
  for (let i = 0; i < repeats; i++) dst.set(src);
  postMessage({ ms: performance.now() - t, checksum: dst[bytes / 8] });
};
