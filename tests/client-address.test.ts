/**
 * `bun run client` without `--address` (issue 29, item 6): it dials the port the edge's own settings
 * give (EDGE_GRPC_PORT), and a connection that is refused names the address it tried and `--address`.
 * Real processes against a real edge on loopback.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { freePort } from './helpers/shim-process.ts';

/** The client as a process, with only these EDGE_* variables (none from the test's own environment). */
async function client(args: string[], edgeEnv: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('EDGE_')));
  const child = Bun.spawn(['bun', 'src/tools/client.ts', ...args], {
    cwd: PROJECT_ROOT,
    env: { ...env, ...edgeEnv },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 60_000,
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

describe('bun run client without --address', () => {
  let edge: RunningEdge;
  beforeAll(async () => {
    const demo = await ensureDemoPacks();
    const flags = ['--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--cloud', 'none', '--log-level', 'error'];
    edge = await startEdge(parseEdgeConfig([...flags, '--edge-model', demo.edgePack, '--router', demo.routerPack], {}));
  }, 60_000);
  afterAll(() => edge?.stop());

  test('dials EDGE_GRPC_PORT on this machine', async () => {
    const result = await client(['Once upon a time', '--max-new-tokens', '3', '--json'], { EDGE_GRPC_PORT: String(edge.grpcPort) });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const events = result.stdout
      .trim()
      .split('\n')
      .map((line) => Object.keys(JSON.parse(line) as object)[0]);
    expect(events).toEqual(['token', 'token', 'token', 'done']);
  });

  test('a refused connection names the address it tried and --address', async () => {
    const port = await freePort();
    const result = await client(['Hi', '--deadline-ms', '5000'], { EDGE_GRPC_PORT: String(port) });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `error: no edge answered at 127.0.0.1:${port} (from EDGE_GRPC_PORT, or its default): connect ECONNREFUSED 127.0.0.1:${port}; start one (bun run start) or give its address with --address host:port\n`,
    );
    const given = await client(['Hi', '--address', `127.0.0.1:${port}`, '--deadline-ms', '5000'], {});
    expect(given.stderr).toStartWith(`error: no edge answered at 127.0.0.1:${port} (from --address): `);
  });

  test('with the edge gRPC service off, it asks for --address', async () => {
    const result = await client(['Hi'], { EDGE_GRPC_PORT: 'off' });
    expect(result.code).toBe(2);
    expect(result.stderr).toStartWith("error: EDGE_GRPC_PORT is off: give the edge's address with --address host:port");
  });
});
