/**
 * A stop that comes while a server is still starting ends it as cleanly as a stop after it serves: the
 * edge and the shim, each a real process, get SIGTERM before their model loads (at their first log line,
 * written right after the handlers are installed), at fixed moments while they load, and just after they
 * serve; every time the process exits 0 with no error and no forced exit.
 *
 * Under a launcher (an IPC channel, as `bun run start` gives its children) a process takes its stop
 * requests from the launcher alone: the signal a terminal's Ctrl-C sends the whole process group is not a
 * second request, so the first Ctrl-C logs a plain "stopping" and only a second request "already shutting
 * down"; a third forces the exit.
 */
import { EventEmitter } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'bun:test';
import { handleStopSignals, type StopHost } from '../src/shared/process/graceful-signals.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { SupervisedChild } from '../src/supervised-child.ts';
import { collectOutput, exitWithin, jsonLines, type ProcessOutput } from './helpers/process-output.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

interface EntryPoint {
  name: string;
  args: () => Promise<string[]>;
  /** The first log line, written once the handlers are installed and before anything loads. */
  first: string;
  /** The line that says it serves. */
  serving: string;
  /** The line its graceful shutdown ends with. */
  stopped: string;
}

const ENTRY_POINTS: EntryPoint[] = [
  {
    name: 'shim',
    args: async () => ['src/cloud/main.ts', '--host', '127.0.0.1', '--port', '0', '--log-level', 'debug'],
    first: '"config"',
    serving: '"shim listening"',
    stopped: '"shim stopped"',
  },
  {
    name: 'edge',
    args: async () => {
      const demo = await ensureDemoPacks();
      return [
        'src/edge/main.ts',
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--grpc-port',
        '0',
        '--cloud',
        'none',
        '--edge-model',
        demo.edgePack,
        '--router',
        demo.routerPack,
        '--log-level',
        'debug',
      ];
    },
    first: '"starting"',
    serving: '"edge ready"',
    stopped: '"edge stopped"',
  },
];

/** When the signal is sent: on a log line, or a fixed time after that first line. */
type Moment = { at: 'line'; line: (e: EntryPoint) => string } | { at: 'delay'; ms: number };

const MOMENTS: [string, Moment][] = [
  ['before the model loads (its first log line)', { at: 'line', line: (e) => e.first }],
  ['while it loads (20 ms later)', { at: 'delay', ms: 20 }],
  ['while it loads (80 ms later)', { at: 'delay', ms: 80 }],
  ['while it loads (200 ms later)', { at: 'delay', ms: 200 }],
  ['just after it serves', { at: 'line', line: (e) => e.serving }],
];

async function stopAt(entry: EntryPoint, moment: Moment): Promise<{ code: number | null; stderr: ProcessOutput; served: boolean }> {
  const child = Bun.spawn(['bun', ...(await entry.args())], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
  const stderr = collectOutput(child.stderr as ReadableStream<Uint8Array>);
  collectOutput(child.stdout as ReadableStream<Uint8Array>);
  try {
    await stderr.waitForLine((l) => l.includes(entry.first), 20_000, `${entry.name}'s first log line`);
    if (moment.at === 'line') await stderr.waitForLine((l) => l.includes(moment.line(entry)), 20_000, `${entry.name}: ${moment.line(entry)}`);
    else await Bun.sleep(moment.ms);
    const served = stderr.text().includes(entry.serving);
    child.kill('SIGTERM');
    const code = await exitWithin(child, 20_000);
    await stderr.closed;
    return { code, stderr, served };
  } finally {
    child.kill('SIGKILL');
  }
}

for (const entry of ENTRY_POINTS) {
  describe(`bun run ${entry.name}: SIGTERM during start-up`, () => {
    for (const [name, moment] of MOMENTS) {
      test(name, async () => {
        const { code, stderr, served } = await stopAt(entry, moment);
        expect(code).toBe(0);
        const logs = jsonLines(stderr);
        expect(logs.filter((l) => l.level === 'error')).toEqual([]);
        expect(logs.some((l) => l.msg === 'forced exit before the shutdown finished')).toBe(false);
        const signalled = logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('signal received'));
        expect(signalled).toMatchObject({ signal: 'SIGTERM' });
        // Once it served, the stop is the ordinary graceful shutdown, with its final line.
        if (served) expect(stderr.text()).toContain(entry.stopped);
        if (moment.at === 'line' && moment.line(entry) === entry.first) expect(served).toBe(false);
      }, 60_000);
    }
  });
}

/** A stand-in for `process`: signals and IPC messages emitted by the test, exits recorded. */
function fakeHost(connected: boolean): { host: StopHost & EventEmitter; exits: number[]; setConnected(value: boolean): void } {
  const exits: number[] = [];
  const emitter = new EventEmitter();
  let isConnected = connected;
  const host = Object.defineProperties(emitter, {
    connected: { get: () => isConnected },
    exit: {
      value: (code = 0) => {
        exits.push(code);
        return undefined as never;
      },
    },
  }) as EventEmitter & StopHost;
  return { host, exits, setConnected: (value) => (isConnected = value) };
}

function recordedLog(): { log: ReturnType<typeof createLogger>; messages: () => string[]; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))), messages: () => lines.map((l) => l.msg as string), lines };
}

describe('stop requests under a launcher', () => {
  test("a group's signal is left to the launcher; its first request logs 'stopping', the second 'already shutting down', the third forces the exit", async () => {
    const { host, exits } = fakeHost(true);
    const { log, messages, lines } = recordedLog();
    const stop = handleStopSignals(log, { host });
    let shutdowns = 0;
    stop.whenStopped(() => (shutdowns++, new Promise<void>(() => {})));
    host.emit('SIGINT', 'SIGINT');
    host.emit('SIGTERM', 'SIGTERM');
    expect(stop.requested).toBe(false);
    expect(messages()).toEqual(['signal left to the launcher', 'signal left to the launcher']);
    host.emit('message', { type: 'ready', address: 'x' });
    host.emit('message', { type: 'stop', signal: 'SIGINT' });
    expect(stop.requested).toBe(true);
    expect(shutdowns).toBe(1);
    expect(lines.at(-1)).toMatchObject({ level: 'info', msg: 'stopping', signal: 'SIGINT', from: 'launcher' });
    host.emit('message', { type: 'stop', signal: 'SIGINT' });
    expect(lines.at(-1)).toMatchObject({ level: 'info', msg: 'already shutting down; another signal forces the exit', signal: 'SIGINT' });
    expect(exits).toEqual([]);
    host.emit('message', { type: 'stop', signal: 'SIGINT' });
    expect(lines.at(-1)).toMatchObject({ level: 'warn', msg: 'forced exit before the shutdown finished' });
    expect(exits).toEqual([130]);
    expect(shutdowns).toBe(1);
  });

  test('a request during start-up stops the start; the shutdown then runs at once and exits 0', async () => {
    const { host, exits } = fakeHost(true);
    const { log, messages } = recordedLog();
    const stop = handleStopSignals(log, { host });
    host.emit('message', { type: 'stop', signal: 'SIGTERM' });
    expect(stop.signal.aborted).toBe(true);
    stop.whenStopped(async () => {});
    await Bun.sleep(0);
    expect(messages()).toEqual(['stopping during start-up', 'stopping: the signal came while starting']);
    expect(exits).toEqual([0]);
  });

  test('without a launcher (or once it is gone) signals are the requests, as before', () => {
    const { host, setConnected } = fakeHost(false);
    const { log, messages } = recordedLog();
    const stop = handleStopSignals(log, { host });
    stop.whenStopped(() => new Promise<void>(() => {}));
    host.emit('SIGTERM', 'SIGTERM');
    expect(messages()).toEqual(['signal received; shutting down']);
    setConnected(true);
    host.emit('SIGINT', 'SIGINT');
    setConnected(false);
    host.emit('SIGINT', 'SIGINT');
    expect(messages()).toEqual(['signal received; shutting down', 'signal left to the launcher', 'already shutting down; another signal forces the exit']);
  });

  test('over a real IPC channel: SIGINT to the child alone changes nothing, each stop() / repeatStop() is one request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stop-requests-'));
    try {
      const logFile = join(dir, 'log.jsonl');
      const script = join(dir, 'child.ts');
      // A server whose shutdown takes a while, so the second request comes while it runs.
      writeFileSync(
        script,
        `import { appendFileSync } from 'node:fs';
import { handleStopSignals } from ${JSON.stringify(join(PROJECT_ROOT, 'src/shared/process/graceful-signals.ts'))};
import { createLogger } from ${JSON.stringify(join(PROJECT_ROOT, 'src/shared/process/logger.ts'))};
import { notifyReady } from ${JSON.stringify(join(PROJECT_ROOT, 'src/shared/process/ready-notice.ts'))};
const stop = handleStopSignals(createLogger('child', 'debug', (line) => appendFileSync(${JSON.stringify(logFile)}, line)));
const timer = setInterval(() => {}, 1000);
stop.whenStopped(async () => { await Bun.sleep(1500); clearInterval(timer); });
notifyReady({ address: 'child' });
`,
      );
      const printed: string[] = [];
      const child = new SupervisedChild({ name: 'child', command: ['bun', script], env: process.env }, (line) => printed.push(line));
      await child.firstReady;
      const messages = () =>
        readFileSync(logFile, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).msg as string);
      // As a terminal's Ctrl-C reaches every process of its group.
      process.kill(child.pid!, 'SIGINT');
      for (let waited = 0; !existsSync(logFile) && waited < 5_000; waited += 20) await Bun.sleep(20);
      expect(messages()).toEqual(['signal left to the launcher']);
      const stopped = child.stop('SIGINT');
      await Bun.sleep(300);
      child.repeatStop('SIGINT');
      const end = await Promise.race([stopped.then(() => child.ended), Bun.sleep(10_000).then(() => undefined)]);
      expect(end).toMatchObject({ description: 'exited with code 0', clean: true });
      expect(messages()).toEqual(['signal left to the launcher', 'stopping', 'already shutting down; another signal forces the exit']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
