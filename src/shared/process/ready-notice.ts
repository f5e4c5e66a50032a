/**
 * How a server process tells the process that started it that it serves, the way systemd's
 * `Type=notify` services do with READY=1: a message on the IPC channel Bun opens for a child spawned
 * with `ipc` (`bun run start` does). A process started any other way has no channel, and this does nothing.
 *
 * @example
 * if (!notifyReady({ address: edge.url })) console.log(`edge page: ${edge.url}`);
 */

/** The message a child sends once it serves. */
export interface ReadyNotice {
  type: 'ready';
  /** What the process serves on, for the launcher's output. */
  address: string;
}

export function isReadyNotice(message: unknown): message is ReadyNotice {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'ready';
}

/**
 * Tells the launcher, when there is one; returns whether there was. A process under a launcher leaves
 * announcing its address to it (`bun run start` prints the page's URL once, for the whole system).
 */
export function notifyReady(details: Omit<ReadyNotice, 'type'>): boolean {
  if (!process.send) return false;
  process.send({ type: 'ready', ...details } satisfies ReadyNotice);
  return true;
}
