/**
 * `bun run start`: the whole system on one machine with the embedded defaults. Builds the demo packs if
 * they are missing, starts the cloud shim (embedded stories260K model) and the edge (distilled 1-layer model,
 * trained router, web page and gRPC) as two processes, as they would run on two machines, and prints the
 * page's URL once the edge is ready.
 *
 * Settings: the shim reads its SHIM_* variables, the edge its EDGE_* variables and the extra flags
 * (`bun run start -- --port 9000`); this launcher adds no flags of its own, so nothing overrides them. The
 * one link it makes: unless EDGE_CLOUD, `--cloud` or the edge's config file names a cloud, the edge dials
 * the shim started here (so `SHIM_PORT=6000 bun run start` works). Both ports must be fixed (not 0):
 * the launcher needs them to connect the two and to print the URL.
 *
 * Stopping: Ctrl-C or SIGTERM sends each child one SIGTERM. Signals arrive more than once by design
 * (a terminal's Ctrl-C reaches the whole process group, and `bun run` forwards it to this process as
 * well), so every process here treats a repeated signal as the same request; a third one, or children
 * still running FORCE_AFTER_MS after their SIGTERM, ends them with SIGKILL. If either child exits on its
 * own, the other is stopped. The exit code is 0 only if both children exited 0.
 */
import type { Subprocess } from 'bun';
import { parseShimConfig } from './cloud/config.ts';
import { DEFAULT_EDGE_CONFIG, parseEdgeConfig } from './edge/config.ts';
import { AppError, errorMessage } from './shared/errors.ts';
import { buildDemoPacks } from './tools/models/demo.ts';
import { waitUntilReady } from './shared/wait-until-ready.ts';

/** How long the children get to shut down gracefully before they are killed. */
const FORCE_AFTER_MS = 20_000;
/** The signal that forces the end (the same count as the children's, see graceful-signals.ts). */
const FORCE_AT = 3;

const wildcard = (host: string) => host === '0.0.0.0' || host === '::' || host === '';
const hostPort = (host: string, port: number) => `${host.includes(':') ? `[${host}]` : host}:${port}`;

async function main(): Promise<number> {
  const env = process.env;
  const edgeArgs = process.argv.slice(2);
  // Fail fast on bad settings, before building packs or starting anything.
  const shimConfig = parseShimConfig([], env);
  const edgeConfig = parseEdgeConfig(edgeArgs, env);
  if (shimConfig.port === 0 || edgeConfig.port === 0) {
    throw new AppError('INVALID_ARGUMENT', 'bun run start needs fixed ports for the shim and the edge page (port 0 is for running them separately)');
  }
  const shimAddress = hostPort(wildcard(shimConfig.host) ? '127.0.0.1' : shimConfig.host, shimConfig.port);
  const cloudChosen = env.EDGE_CLOUD !== undefined || edgeConfig.cloud !== DEFAULT_EDGE_CONFIG.cloud;
  const edgeEnv = cloudChosen ? env : { ...env, EDGE_CLOUD: shimAddress };

  const built = await buildDemoPacks(undefined, (line) => console.log(line));
  if (built.length) console.log(`built ${built.length} demo pack(s)`);

  const children: { name: string; process: Subprocess; signalled: boolean }[] = [
    { name: 'cloud shim', process: Bun.spawn(['bun', 'src/cloud/main.ts'], { env, stdout: 'inherit', stderr: 'inherit' }), signalled: false },
    { name: 'edge', process: Bun.spawn(['bun', 'src/edge/main.ts', ...edgeArgs], { env: edgeEnv, stdout: 'inherit', stderr: 'inherit' }), signalled: false },
  ];
  console.log(children.map((c) => `started ${c.name} (pid ${c.process.pid})`).join(', '));

  let forceTimer: ReturnType<typeof setTimeout> | undefined;
  const killAll = () => {
    for (const child of children) if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  };
  /** Each child gets one SIGTERM, however many times this runs. */
  const stopAll = () => {
    for (const child of children) {
      if (child.signalled || child.process.exitCode !== null || child.process.signalCode !== null) continue;
      child.signalled = true;
      child.process.kill('SIGTERM');
    }
    forceTimer ??= setTimeout(() => {
      console.error(`children still running ${FORCE_AFTER_MS} ms after SIGTERM: killing them`);
      killAll();
    }, FORCE_AFTER_MS);
  };
  let signals = 0;
  const onSignal = () => {
    if (++signals < FORCE_AT) stopAll();
    else killAll();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const firstExit = Promise.race(children.map((child) => child.process.exited));
  const host = wildcard(edgeConfig.host) ? 'localhost' : edgeConfig.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${edgeConfig.port}/`;
  const ready = waitUntilReady(url, 120_000).then(
    () => 'ready' as const,
    (e: unknown) => {
      console.error(`error: ${errorMessage(e)}`);
      stopAll();
      return 'failed' as const;
    },
  );
  const first = await Promise.race([ready, firstExit]);
  if (first === 'ready') {
    const grpc = edgeConfig.grpcPort >= 0 ? `edge gRPC on :${edgeConfig.grpcPort}, ` : '';
    console.log(`\nEdge token router is up: ${url}  (${grpc}cloud shim on ${shimAddress})\n`);
  }

  await firstExit;
  stopAll();
  await Promise.all(children.map((c) => c.process.exited));
  clearTimeout(forceTimer);
  for (const { name, process: child } of children) {
    console.log(`${name} exited with ${child.signalCode ? `signal ${child.signalCode}` : `code ${child.exitCode}`}`);
  }
  return children.every((c) => c.process.exitCode === 0) ? 0 : 1;
}

try {
  process.exit(await main());
} catch (e) {
  console.error(`error: ${errorMessage(e)}`);
  process.exit(1);
}
