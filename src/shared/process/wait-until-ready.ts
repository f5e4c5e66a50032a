/**
 * Waits for a process's HTTP readiness endpoint: the launcher (`bun run start`) waits for the edge before
 * printing its URL, and the kiosk before opening the page.
 *
 * @example
 * await waitUntilReady('http://localhost:8080/', 120_000);
 */
import { AppError } from '../errors.ts';

/** Polls `<url>/readyz` until it answers 200 or the time is up. */
export async function waitUntilReady(url: string, timeoutMs: number, intervalMs = 500): Promise<void> {
  const readyz = new URL('/readyz', url).toString();
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(readyz, { signal: AbortSignal.timeout(Math.min(2000, intervalMs * 4)) });
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    await Bun.sleep(intervalMs);
  }
  throw new AppError('UNAVAILABLE', `${readyz} not ready after ${timeoutMs} ms (${last})`);
}
