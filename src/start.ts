/**
 * `bun run start`: the whole system on one machine with the embedded defaults. Builds the demo packs if
 * they are missing, starts the cloud shim (embedded stories260K model) and the edge (3-layer model,
 * trained router, web page and gRPC) as two processes, as they would run on two machines, and prints the
 * page's URL once the edge is ready. Ctrl-C or SIGTERM stops both; if either dies, the other is stopped.
 *
 * Extra flags go to the edge (e.g. `bun run start -- --port 9000`); SHIM_* and EDGE_* variables apply.
 */
import { buildDemoPacks } from './tools/models/demo.ts';
import { waitUntilReady } from './tools/kiosk.ts';
import { DEMO } from './shared/paths.ts';
import { errorMessage } from './shared/errors.ts';
import { parseEdgeConfig } from './edge/config.ts';

const SHIM_PORT = '50051';

async function main(): Promise<number> {
  const edgeArgs = process.argv.slice(2);
  const edgeConfig = parseEdgeConfig(edgeArgs, process.env); // fail fast on bad flags
  const built = await buildDemoPacks(undefined, (line) => console.log(line));
  if (built.length) console.log(`built ${built.length} demo pack(s)`);

  const children = [
    Bun.spawn(['bun', 'src/cloud/main.ts', '--port', SHIM_PORT, '--model-pack', DEMO.cloudPack], { stdout: 'inherit', stderr: 'inherit' }),
    Bun.spawn(['bun', 'src/edge/main.ts', '--cloud', `127.0.0.1:${SHIM_PORT}`, ...edgeArgs], { stdout: 'inherit', stderr: 'inherit' }),
  ];
  const stopAll = () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  };
  process.once('SIGINT', stopAll);
  process.once('SIGTERM', stopAll);
  const firstExit = Promise.race(children.map((child) => child.exited.then((code) => ({ child, code }))));

  const host = edgeConfig.host === '0.0.0.0' || edgeConfig.host === '::' ? 'localhost' : edgeConfig.host;
  const url = `http://${host}:${edgeConfig.port}/`;
  const ready = waitUntilReady(url, 120_000).then(
    () => 'ready' as const,
    (e: unknown) => {
      console.error(`error: ${errorMessage(e)}`);
      stopAll();
      return 'failed' as const;
    },
  );
  const first = await Promise.race([ready, firstExit]);
  if (first === 'ready') console.log(`\nEdge token router is up: ${url}  (edge gRPC on :${edgeConfig.grpcPort}, cloud shim on :${SHIM_PORT})\n`);

  const { code } = await firstExit;
  stopAll();
  await Promise.all(children.map((c) => c.exited));
  return code;
}

try {
  process.exit(await main());
} catch (e) {
  console.error(`error: ${errorMessage(e)}`);
  process.exit(1);
}
