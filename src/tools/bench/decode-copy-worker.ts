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
  // Wait until the flag holds this round's number. The wait is on the value just compared: reading the flag
  // again for it could read the new round, stored (and notified) in between, and then wait for a change that
  // never comes (this hung the bench now and then).
  const flag = new Int32Array(message.start);
  for (let seen = Atomics.load(flag, 0); seen !== message.round; seen = Atomics.load(flag, 0)) Atomics.wait(flag, 0, seen);
  const t = performance.now();
  let copies = 0;
  while (performance.now() - t < message.durationMs) {
    dst.set(src);
    copies++;
  }
  // Wall-clock times comparable across threads.
  postMessage({ copies, from: performance.timeOrigin + t, to: performance.timeOrigin + performance.now(), checksum: dst[dst.length >> 1] });
};
