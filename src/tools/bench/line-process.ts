/**
 * A benchmark's long-lived helper process spoken to over a line protocol: one JSON object per line on its
 * stdin (requests) and stdout (replies), its stderr passed to the log. It first prints `{"type":"ready",...}`;
 * every request `{"type":T,...}` is answered by one line of the same type, or by `{"type":"failed","message"}`.
 * The helper exits when its stdin closes, so a benchmark that dies leaves nothing behind. Both sides of
 * `bench decode --peer` speak it: our decode (a Bun script) and llama.cpp's (a node script), so either can
 * sit loaded and idle between the rounds the parent asks for.
 *
 * @example
 * const helper = await LineProcess.start({ command: ['bun', script, JSON.stringify(options)], name: 'our q4 decode', log });
 * const { stepsMs } = await helper.request<{ stepsMs: number[] }>({ type: 'round', steps: 8 });
 * await helper.close();
 */
import type { Subprocess } from 'bun';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { exitOrKill } from '../child-exit.ts';

export interface LineProcessOptions {
  command: string[];
  /** Said in errors and logs: "our q4 decode", "llama.cpp Q4_0". */
  name: string;
  env?: Record<string, string | undefined>;
  log: (line: string) => void;
  /** The longest wait for any one reply, the ready line included. */
  timeoutMs?: number;
}

type Reply = { type: string } & Record<string, unknown>;

export class LineProcess {
  private constructor(
    private readonly child: Subprocess<'pipe', 'pipe', 'pipe'>,
    private readonly lines: AsyncIterator<string>,
    readonly name: string,
    private readonly timeoutMs: number,
    private readonly log: (line: string) => void,
  ) {}

  /** Starts the helper and waits for its ready line, which it returns; stops the helper and throws when that fails. */
  static async start(o: LineProcessOptions): Promise<{ helper: LineProcess; ready: Reply }> {
    let child: Subprocess<'pipe', 'pipe', 'pipe'>;
    try {
      child = Bun.spawn(o.command, { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe', env: o.env ?? process.env });
    } catch (e) {
      throw new AppError('FAILED_PRECONDITION', `could not start ${o.name} (${o.command[0]}): ${errorMessage(e)}`);
    }
    void forwardLines(child.stderr, (line) => o.log(`  ${line}`));
    const helper = new LineProcess(child, readLines(child.stdout)[Symbol.asyncIterator](), o.name, o.timeoutMs ?? 600_000, o.log);
    try {
      return { helper, ready: await helper.reply('ready') };
    } catch (e) {
      // A helper that failed or hangs while starting is not waited for.
      await helper.close(0);
      throw e;
    }
  }

  /** Sends one request and waits for its reply (of the request's type). One request at a time. */
  async request<T>(message: { type: string } & Record<string, unknown>): Promise<T & Reply> {
    try {
      this.child.stdin.write(`${JSON.stringify(message)}\n`);
      this.child.stdin.flush();
    } catch {
      // The helper has exited: the reply below says so, with its exit code.
    }
    return (await this.reply(message.type)) as T & Reply;
  }

  /** Closes the helper's stdin (it exits on that) and kills it when it has not gone within `graceMs`. */
  async close(graceMs = 10_000): Promise<void> {
    try {
      this.child.stdin.end();
    } catch {
      // Already closed: the helper has exited or the kill below ends it.
    }
    await exitOrKill(this.child, graceMs);
  }

  private async reply(type: string): Promise<Reply> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>(
      (_, reject) =>
        (timer = setTimeout(
          () => reject(new AppError('DEADLINE_EXCEEDED', `${this.name} did not answer "${type}" within ${this.timeoutMs} ms`)),
          this.timeoutMs,
        )),
    );
    try {
      for (;;) {
        const next = await Promise.race([this.lines.next(), timeout]);
        if (next.done) throw new AppError('INTERNAL', `${this.name} exited with code ${await this.child.exited} before answering "${type}"`);
        const reply = parseReply(next.value);
        // A line that is not a reply (a library printing to stdout) is shown, not taken for one.
        if (!reply) {
          this.log(`  ${next.value}`);
          continue;
        }
        if (reply.type === 'failed') throw new AppError('INTERNAL', `${this.name} failed: ${String(reply.message)}`);
        if (reply.type !== type) throw new AppError('INTERNAL', `${this.name} answered "${reply.type}" to "${type}"`);
        return reply;
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

function parseReply(line: string): Reply | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === 'object' && value !== null && typeof (value as Reply).type === 'string' ? (value as Reply) : undefined;
  } catch {
    return undefined;
  }
}

async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n')) >= 0) {
      yield buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
    }
  }
  if (buffered) yield buffered;
}

async function forwardLines(stream: ReadableStream<Uint8Array>, log: (line: string) => void): Promise<void> {
  for await (const line of readLines(stream)) if (line.trim()) log(line);
}
