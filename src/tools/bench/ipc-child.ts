/**
 * A benchmark's helper process (the shim of `bench load` and `bench fleet`, the SGLang fake of `bench
 * fleet`): a Bun script started with one JSON argument and an IPC channel, optionally pinned to CPUs,
 * that reports `{type: 'ready', ...}` once it serves or `{type: 'failed', message}` and exits. The child
 * exits when its IPC channel closes, so a killed benchmark leaves nothing behind.
 *
 * @example
 * const { child, ready } = await startIpcChild<Reply>({ script, options: { vocabSize: 512 }, name: 'the SGLang fake' });
 * console.log(ready.url);
 * await stopIpcChild(child);
 */
import { AppError } from '../../shared/errors.ts';
import { exitOrKill } from '../child-exit.ts';
import { isCpuList } from './cpu-pinning.ts';

export type IpcChild = ReturnType<typeof Bun.spawn>;

export interface IpcChildOptions<Message> {
  /** Absolute path of the script. */
  script: string;
  /** Handed to the script as its one argument, as JSON. */
  options: unknown;
  /** Said in errors: "the shim", "the SGLang fake". */
  name: string;
  /** taskset CPU list the child runs on; unpinned when absent. */
  cpus?: string;
  timeoutMs?: number;
  /** Every message after the ready one. */
  onMessage?: (message: Message) => void;
}

type Ready<Message> = Extract<Message, { type: 'ready' }>;

/** Starts the child and waits for its ready message; throws (the child stopped) when it fails or is too slow. */
export async function startIpcChild<Message extends { type: string }>(o: IpcChildOptions<Message>): Promise<{ child: IpcChild; ready: Ready<Message> }> {
  const timeoutMs = o.timeoutMs ?? 120_000;
  if (o.cpus !== undefined && !isCpuList(o.cpus)) throw new AppError('INVALID_ARGUMENT', `CPU list ${JSON.stringify(o.cpus)} is not like "1", "0,2" or "2-3"`);
  let onReady: ((message: Message) => void) | undefined;
  const command = [process.execPath, o.script, JSON.stringify(o.options)];
  const child = Bun.spawn(o.cpus === undefined ? command : ['taskset', '--cpu-list', o.cpus, ...command], {
    stdin: 'ignore',
    stdout: 'inherit',
    stderr: 'inherit',
    serialization: 'json',
    ipc: (message: Message) => (onReady ? onReady(message) : o.onMessage?.(message)),
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const reply = await Promise.race([
      new Promise<Message | { type: 'failed'; message: string }>((resolve) => (onReady = resolve)),
      child.exited.then((code) => ({ type: 'failed' as const, message: `${o.name} exited with code ${code}` })),
      new Promise<{ type: 'failed'; message: string }>(
        (resolve) => (timer = setTimeout(() => resolve({ type: 'failed', message: `${o.name} did not start within ${timeoutMs} ms` }), timeoutMs)),
      ),
    ]);
    if (reply.type !== 'ready')
      throw new AppError('UNAVAILABLE', reply.type === 'failed' && 'message' in reply ? String(reply.message) : `unexpected message from ${o.name}`);
    onReady = undefined;
    return { child, ready: reply as Ready<Message> };
  } catch (e) {
    await stopIpcChild(child);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** Sends `stop` (when given) or closes the channel; kills the child when it has not exited within `graceMs`. */
export async function stopIpcChild(child: IpcChild, stop?: unknown, graceMs = 5_000): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    try {
      if (stop === undefined) child.disconnect();
      else child.send(stop);
    } catch {
      // The channel is already gone: the kill below ends it.
    }
  }
  await exitOrKill(child, graceMs);
}
