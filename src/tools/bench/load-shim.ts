/**
 * The shim of `bench load`, run as a child process so that its memory is measured apart from the load
 * generator's: a real shim (`startShim`, embedded backend) on 127.0.0.1 port 0, driven over IPC.
 *
 * Protocol (JSON over Bun's IPC channel): the child sends `{type: 'ready', address}` once it listens
 * (or `{type: 'failed', message}` and exits); `{type: 'stats', id, collect}` is answered with a
 * ShimStats (its event-loop lag since the stats before, its prefix cache's bytes), after a forced garbage
 * collection and once RSS has settled when `collect` (settledRss); `{type: 'stop'}` shuts the shim down and exits. The child also exits when its
 * parent goes away (the IPC channel disconnects), so a killed benchmark leaves no shim behind.
 *
 * Started by `load-shim-child.ts` as `bun load-shim.ts '<json of ShimConfig overrides>'`.
 */
import { shimConfig, type ShimConfig } from '../../cloud/config.ts';
import { EmbeddedBackend } from '../../cloud/backends/embedded-backend.ts';
import { startShim, type ShimServer } from '../../cloud/shim-server.ts';
import { errorMessage } from '../../shared/errors.ts';
import { createLogger } from '../../shared/process/logger.ts';
import { startLoopLagProbe, type LoopLag } from './loop-lag.ts';

/** What the shim process holds at one moment (after `Bun.gc(true)`, RSS settled, when asked). */
export interface ShimStats {
  rssMb: number;
  heapMb: number;
  /** CPU time the shim process has used since it started, user plus system (process.cpuUsage()). */
  cpuMs: number;
  /** Sessions in the store, context tokens they hold, and Route streams in flight. */
  sessions: number;
  contextTokens: number;
  streams: number;
  /** KV caches the embedded backend dropped to stay within its cap, and rebuilt later. */
  evictions: number;
  rebuilds: number;
  /**
   * Bytes the embedded backend's prefix cache holds (its PrefixCache's `stats.bytes`: KV snapshots that
   * outlive their sessions, up to `--prefix-cache-mb`); 0 without one. Part of `rssMb`, and meant to stay.
   */
  prefixCacheBytes: number;
  /** How late the shim's event loop ran a 2 ms timer since the stats before, p99 (loop-lag.ts): steps wait as long to be read. */
  loopLagP99Ms: number;
  /** The latest it ran one over the same time: the longest stall, a garbage collection's pause or a long turn. */
  loopLagMaxMs: number;
}

export type ShimChildRequest = { type: 'stats'; id: number; collect: boolean } | { type: 'stop' };
export type ShimChildReply = { type: 'ready'; address: string } | { type: 'failed'; message: string } | ({ type: 'stats'; id: number } & ShimStats);

const MB = 1024 * 1024;
/** settledRss reads RSS this often, until it falls by less than SETTLED_FALL_BYTES between two readings. */
const SETTLE_INTERVAL_MS = 250;
const SETTLE_MAX_READINGS = 8;
const SETTLED_FALL_BYTES = MB;

/**
 * The resident set once a forced GC's garbage is back with the system. The allocator returns the pages
 * the GC freed some hundreds of milliseconds later, not at once, so RSS read right after the GC still
 * counts them: after a load that churned through many KV caches that is a large share, and it would read
 * as growth. Reads until RSS stops falling (SETTLE_MAX_READINGS at most).
 */
async function settledRss(): Promise<number> {
  Bun.gc(true);
  let rss = process.memoryUsage().rss;
  for (let reading = 0; reading < SETTLE_MAX_READINGS; reading++) {
    await Bun.sleep(SETTLE_INTERVAL_MS);
    Bun.gc(true);
    const next = process.memoryUsage().rss;
    const fell = rss - next;
    rss = next;
    if (fell < SETTLED_FALL_BYTES) break;
  }
  return rss;
}

/** The figures of a running shim in this process; exported for tests, which compare them with the shim's own. */
export async function shimStats(shim: ShimServer, collect: boolean, lag: LoopLag): Promise<ShimStats> {
  const rss = collect ? await settledRss() : process.memoryUsage().rss;
  const memory = process.memoryUsage();
  const cpu = process.cpuUsage();
  const embedded = shim.backend instanceof EmbeddedBackend ? shim.backend : undefined;
  const backendStats = embedded?.stats ?? { evictions: 0, rebuilds: 0 };
  return {
    rssMb: rss / MB,
    heapMb: memory.heapUsed / MB,
    cpuMs: (cpu.user + cpu.system) / 1000,
    sessions: shim.store.count,
    contextTokens: shim.store.totalTokens,
    streams: shim.streams.size,
    evictions: backendStats.evictions,
    rebuilds: backendStats.rebuilds,
    prefixCacheBytes: embedded?.prefixCache?.stats.bytes ?? 0,
    loopLagP99Ms: lag.p99Ms,
    loopLagMaxMs: lag.maxMs,
  };
}

async function serve(): Promise<void> {
  const send = (reply: ShimChildReply) => process.send!(reply);
  let shim: ShimServer;
  try {
    const overrides = JSON.parse(process.argv[2] ?? '{}') as Partial<ShimConfig>;
    const config = shimConfig({ ...overrides, host: '127.0.0.1', port: 0, logLevel: 'error' });
    shim = await startShim(config, { log: createLogger('shim', config.logLevel) });
  } catch (e) {
    send({ type: 'failed', message: errorMessage(e) });
    process.exit(1);
  }
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await shim.shutdown(1_000).catch(() => {});
    process.exit(0);
  };
  // Each stats reply carries the loop's lag since the one before.
  let loopLag = startLoopLagProbe();
  process.on('message', (message: ShimChildRequest) => {
    if (message.type === 'stats') {
      const lag = loopLag.stop();
      loopLag = startLoopLagProbe();
      void shimStats(shim, message.collect, lag).then((stats) => send({ type: 'stats', id: message.id, ...stats }));
    } else if (message.type === 'stop') void stop();
  });
  process.on('disconnect', () => void stop());
  send({ type: 'ready', address: shim.address });
}

if (import.meta.main) await serve();
