/**
 * One thread of the copy-bandwidth measurement (see decode-bandwidth.ts). `init` allocates and
 * touches its buffers; each `run` waits for the common start signal, then copies for `durationMs` and
 * reports how many copies it finished between which wall-clock times.
 */
declare const self: Worker;

type Command = { cmd: 'init'; bytes: number } | { cmd: 'run'; durationMs: number; start: SharedArrayBuffer; round: number };

let src = new Float32Array(0);
let dst = new Float32Array(0);

self.onmessage = (event: MessageEvent<Command>) => {
  const message = event.data;
  if (message.cmd === 'init') {
    src = new Float32Array(message.bytes / 4).fill(1);
    dst = new Float32Array(message.bytes / 4);
    dst.set(src); // touches every page of both before timing
    postMessage({ ready: true });
    return;
  }
  // Wait until the flag holds this round's number.
  const flag = new Int32Array(message.start);
  while (Atomics.load(flag, 0) !== message.round) Atomics.wait(flag, 0, Atomics.load(flag, 0));
  const t = performance.now();
  let copies = 0;
  while (performance.now() - t < message.durationMs) {
    dst.set(src);
    copies++;
  }
  // Wall-clock times comparable across threads.
  postMessage({ copies, from: performance.timeOrigin + t, to: performance.timeOrigin + performance.now(), checksum: dst[dst.length >> 1] });
};
