/**
 * A stop that comes while a server is still starting ends it as cleanly as a stop after it serves: the
 * edge and the shim, each a real process, get SIGTERM before their model loads (at their first log line,
 * written right after the handlers are installed), at fixed moments while they load, and just after they
 * serve; every time the process exits 0 with no error and no forced exit.
 */
import { describe, expect, test } from 'bun:test';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
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
      return ['src/edge/main.ts', '--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--cloud', 'none', '--edge-model', demo.edgePack, '--router', demo.routerPack, '--log-level', 'debug'];
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
