/**
 * Stopping a child process the tools started (nginx for the fleet, a bench's helper or IPC child): it is
 * given `graceMs` to exit after it was asked to (a signal, a closed stdin or channel), and killed outright after that, so
 * a stuck child never hangs the caller.
 *
 * @example
 * child.kill('SIGTERM');
 * await exitOrKill(child, 5_000);
 */
import type { Subprocess } from 'bun';

/** Waits up to `graceMs` for `child` to exit; then sends SIGKILL and waits for that exit. */
export async function exitOrKill(child: Subprocess, graceMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const exited = await Promise.race([child.exited.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
  clearTimeout(timer);
  if (!exited) {
    child.kill('SIGKILL');
    await child.exited;
  }
}
