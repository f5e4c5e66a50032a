/**
 * What a user of the command line meets first: `--help` on every tool and subcommand prints its usage and
 * exits 0; a port that is taken is named with what to do instead; `client --json` prints the messages'
 * own fields, not proto-loader's oneof markers. Every command runs as a real process.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

async function run(args: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn(['bun', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe', timeout: timeoutMs });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

/** Every entry point and subcommand, as `bun run` spells it, with the start of the usage it must print. */
const HELP_CASES: [string[], string][] = [
  [['run', 'client', '--', '--help'], 'usage: bun run client'],
  [['run', 'start', '--', '--help'], 'usage: bun run start'],
  [['run', 'kiosk', '--', '--help'], 'usage: bun run kiosk'],
  [['run', 'edge', '--', '--help'], 'usage: bun run edge'],
  [['run', 'shim', '--', '--help'], 'usage: bun run shim'],
  ...['convert-llama2c', 'random', 'expose-hidden', 'inspect', 'demo', 'quantize', 'optimize'].map((c): [string[], string] => [
    ['run', 'models', c, '--help'],
    'usage: bun run models',
  ]),
  ...['train', 'eval'].map((c): [string[], string] => [['run', 'router', c, '--help'], 'usage: bun run router']),
  [['run', 'eval', '--help'], 'usage: bun run eval'],
  ...['edge', 'decode', 'shim', 'latency', 'load', 'concurrency', 'prefix', 'fleet', 'affinity', 'embedded-batching', 'score-flood'].map(
    (t): [string[], string] => [['run', 'bench', t, '--help'], `usage: bun run bench ${t} `],
  ),
];

describe('--help', () => {
  test.each(HELP_CASES)('bun %p prints its usage and exits 0', async (args, usage) => {
    const { code, stdout, stderr } = await run(args);
    expect(stderr).not.toContain('Unknown option');
    expect(stdout.startsWith(usage)).toBe(true);
    expect(code).toBe(0);
  });

  test('-h works too, and a --help after `--` is the prompt, not a flag', async () => {
    const short = await run(['run', 'client', '--', '-h']);
    expect(short.code).toBe(0);
    expect(short.stdout).toStartWith('usage: bun run client');
    // The client's argument parser stops at `--`: "--help" is then its one prompt (refused here: no edge at this address).
    const prompt = await run(['src/tools/client.ts', '--address', '127.0.0.1:1', '--deadline-ms', '2000', '--', '--help']);
    expect(prompt.stdout).not.toContain('usage:');
    expect(prompt.code).toBe(1);
  });
});

describe('a port that is already taken', () => {
  let holder: Server;
  let port: number;
  beforeAll(async () => {
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '0.0.0.0', resolve));
    port = (holder.address() as { port: number }).port;
  });
  afterAll(() => holder.close());

  test('the shim names the port and the flag to change it, without sending the user to --help', async () => {
    const demo = await ensureDemoPacks();
    const { code, stderr } = await run(['src/cloud/main.ts', '--port', String(port), '--model-pack', demo.cloudPack, '--log-level', 'error']);
    expect(code).toBe(1);
    expect(stderr.trim()).toBe(
      `error: port ${port} (the shim's gRPC service) is already in use: stop the process that holds it, or choose another port with --port or SHIM_PORT (0 = any free port)`,
    );
  });

  test('the edge names its HTTP port, and its gRPC port, the same way', async () => {
    const demo = await ensureDemoPacks();
    const base = ['src/edge/main.ts', '--cloud', 'none', '--edge-model', demo.edgePack, '--router', demo.routerPack, '--log-level', 'error'];
    const http = await run([...base, '--port', String(port), '--grpc-port', 'off']);
    expect(http.code).toBe(1);
    expect(http.stderr.trim()).toBe(
      `error: port ${port} (the edge's web page and HTTP API) is already in use: stop the process that holds it, or choose another port with --port or EDGE_PORT (0 = any free port)`,
    );
    const grpc = await run([...base, '--port', '0', '--grpc-port', String(port)]);
    expect(grpc.code).toBe(1);
    expect(grpc.stderr.trim()).toBe(
      `error: port ${port} (the edge's gRPC Generate service) is already in use: stop the process that holds it, or choose another port with --grpc-port or EDGE_GRPC_PORT (0 = any free port)`,
    );
  });
});

describe('client --json', () => {
  let edge: RunningEdge;
  beforeAll(async () => {
    const demo = await ensureDemoPacks();
    const flags = ['--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--cloud', 'none', '--log-level', 'error'];
    edge = await startEdge(parseEdgeConfig([...flags, '--edge-model', demo.edgePack, '--router', demo.routerPack], {}));
  }, 60_000);
  afterAll(() => edge?.stop());

  test('one JSON line per event with the message fields only: no "_score":"score", no "event":"token"', async () => {
    const address = `127.0.0.1:${edge.grpcPort}`;
    const { code, stdout, stderr } = await run([join('src/tools/client.ts'), 'Once upon a time', '--address', address, '--max-new-tokens', '3', '--json']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const events = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, Record<string, unknown>>);
    expect(events.map((e) => Object.keys(e))).toEqual([['token'], ['token'], ['token'], ['done']]);
    for (const { token } of events.slice(0, 3)) {
      expect(Object.keys(token!).sort()).toEqual(['cloudError', 'id', 'index', 'score', 'source', 'text', 'timings']);
      expect(typeof token!.score).toBe('number');
      expect(['slm', 'fallback']).toContain(token!.source as string); // no cloud here: routed tokens fall back
    }
    expect(stdout).not.toContain('"_');
    expect(events[3]!.done!.finishReason).toBe('length');
  }, 60_000);
});
