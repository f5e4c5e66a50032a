/**
 * `bun run start`: the whole system on one machine with the embedded defaults. Builds the demo pair's
 * packs if they are missing (the `models demo --pair chat` tool, as a child process), starts the cloud
 * shim (embedded chat-tuned stories260K model) and the edge (chat-tuned 1-layer model, its router trained
 * on conversations, web page with Chat, OpenAI API and gRPC) as two processes, as they would run on two
 * machines, and prints the page's URL once both serve. `--pair stories` serves the earlier story pair
 * (plain text, no chat template; the packs the shim and edge default to) instead.
 *
 * Settings: the shim reads its SHIM_* variables, the edge its EDGE_* variables and the extra flags
 * (`bun run start -- --port 9000`); the launcher's one flag, `--pair`, is its own and not passed on, and
 * it adds no flags, so nothing overrides them. The links it makes, each only where the settings leave the
 * default: the edge dials the shim started here (unless EDGE_CLOUD, `--cloud` or the edge's config file
 * names a cloud, so `SHIM_PORT=6000 bun run start` works), and the pair's packs are the models
 * (EDGE_EDGE_MODEL, EDGE_ROUTER, SHIM_MODEL_PACK in the children's environment, which flags still
 * override). Both ports must be fixed (not 0): the launcher needs them to connect the two and to print the URL.
 *
 * Supervision: a child that dies after it served is restarted with a growing delay (supervised-child.ts),
 * so a crashed shim costs the edge only fallback tokens until it is back, never the page. A child that
 * dies before it ever served could not start (a bad setting, a port in use): then everything stops.
 *
 * Stopping: only SIGINT or SIGTERM to the launcher stops the system; each child gets one stop request
 * per request the launcher gets, over its IPC channel (supervised-child.ts), and leaves the signals that
 * reach the whole process group (a terminal's Ctrl-C) to the launcher, so a first Ctrl-C is one request
 * everywhere. The handlers are installed before anything else, so a stop during start-up (while the packs
 * build or the children load) is as clean as a later one. One Ctrl-C reaches this process twice (from the
 * terminal, and from `bun run`, which forwards it): copies of a signal within SAME_REQUEST_MS are one
 * request. The second request is passed on (the children log it); a third one, or children still
 * running FORCE_AFTER_MS after the first, ends them with SIGKILL. The exit code is 0 when every child
 * ended as asked (see ChildEnd.clean).
 */
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { parseShimConfig } from './cloud/config.ts';
import { DEFAULT_EDGE_CONFIG, EDGE_USAGE, parseEdgeConfig } from './edge/config.ts';
import { AppError, errorMessage } from './shared/errors.ts';
import { CHAT_DEMO, DEMO, PROJECT_ROOT } from './shared/paths.ts';
import { SupervisedChild } from './supervised-child.ts';
import { wantsHelp } from './tools/cli-support.ts';

/** How long the children get to shut down gracefully before they are killed. */
const FORCE_AFTER_MS = 20_000;
/** The request that forces the end (the same count as the children's, see graceful-signals.ts). */
const FORCE_AT = 3;
/** How long a builder ended by SIGINT or SIGTERM waits for the launcher's copy of the signal before it is a failure. */
const SIGNAL_GRACE_MS = 1000;
/** Copies of one signal: `bun run` forwards the terminal's Ctrl-C within milliseconds of the terminal's own. */
const SAME_REQUEST_MS = 200;

const print = (line: string) => console.log(line);

/** The pairs `--pair` chooses: the `models demo` pair that builds them, and their packs. */
const PAIRS = { chat: CHAT_DEMO, stories: DEMO } as const;
type PairName = keyof typeof PAIRS;

/** The launcher's own lines, then the edge's flags (the only ones it passes on). */
const USAGE = `usage: bun run start [-- [--pair chat|stories] EDGE_FLAGS]

Builds the demo pair's packs if missing, starts the cloud shim and the edge as two processes and prints
the page's URL once both serve. --pair chat (the default): the chat-tuned stories260K pair, whose page
has a meaningful Chat and whose edge answers /v1/chat/completions; --pair stories: the story pair, plain
text only. The shim reads its SHIM_* variables (bun run shim -- --help lists them); the edge reads its
EDGE_* variables and the flags below, e.g. bun run start -- --port 9000.

${EDGE_USAGE.replace(/^usage: .*\n\n/, '')}`;
const wildcard = (host: string) => host === '0.0.0.0' || host === '::' || host === '';
const hostPort = (host: string, port: number) => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/** What is running, so that a signal, whenever it comes, reaches it. */
const running: { builder?: Subprocess; children: SupervisedChild[] } = { children: [] };
let stopRequested: () => void = () => {};
const stopped = new Promise<void>((resolve) => (stopRequested = resolve));
/** Stop requests so far (copies of one signal count once). */
let signals = 0;
let lastSignal: { name: NodeJS.Signals; at: number } | undefined;
let forceTimer: ReturnType<typeof setTimeout> | undefined;

function killAll(): void {
  running.builder?.kill('SIGKILL');
  for (const child of running.children) child.kill();
}

function stopAll(signal: NodeJS.Signals = 'SIGTERM'): void {
  stopRequested();
  running.builder?.kill('SIGTERM');
  for (const child of running.children) void child.stop(signal);
  forceTimer ??= setTimeout(() => {
    console.error(`children still running ${FORCE_AFTER_MS} ms after the stop request: killing them`);
    killAll();
  }, FORCE_AFTER_MS);
}

const onSignal = (signal: NodeJS.Signals) => {
  const at = performance.now();
  if (lastSignal?.name === signal && at - lastSignal.at < SAME_REQUEST_MS) return;
  lastSignal = { name: signal, at };
  signals++;
  if (signals === 1) stopAll(signal);
  else if (signals < FORCE_AT) for (const child of running.children) child.repeatStop(signal);
  else killAll();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

/** `--pair NAME` or `--pair=NAME` taken out of the arguments (chat when absent); the rest are the edge's. */
function takePair(args: readonly string[]): { pair: PairName; edgeArgs: string[] } {
  const edgeArgs: string[] = [];
  let name: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--pair') name = args[++i] ?? '';
    else if (arg.startsWith('--pair=')) name = arg.slice('--pair='.length);
    else edgeArgs.push(arg);
  }
  name ??= 'chat';
  if (!Object.hasOwn(PAIRS, name)) throw new AppError('INVALID_ARGUMENT', `--pair must be chat or stories, got ${JSON.stringify(name)}`);
  return { pair: name as PairName, edgeArgs };
}

/**
 * The pair's packs as the children's defaults: each variable only where neither the environment nor the
 * parsed settings (a config file) chose otherwise; flags override variables anyway.
 */
function pairDefaults(pair: PairName, env: NodeJS.ProcessEnv, chosen: { edgeModel: boolean; router: boolean; shimModel: boolean }) {
  const packs = PAIRS[pair];
  const unset = (names: string[], isChosen: boolean) => !isChosen && names.every((name) => env[name] === undefined);
  return {
    edge: {
      ...(unset(['EDGE_EDGE_MODEL', 'EDGE_SLM'], chosen.edgeModel) ? { EDGE_EDGE_MODEL: packs.edgePack } : {}),
      ...(unset(['EDGE_ROUTER'], chosen.router) ? { EDGE_ROUTER: packs.routerPack } : {}),
    },
    shim: unset(['SHIM_MODEL_PACK'], chosen.shimModel) ? { SHIM_MODEL_PACK: packs.cloudPack } : {},
  };
}

async function main(): Promise<number> {
  const env = process.env;
  const args = process.argv.slice(2);
  if (wantsHelp(args)) {
    print(USAGE);
    return 0;
  }
  // Fail fast on bad settings, before building packs or starting anything.
  const { pair, edgeArgs } = takePair(args);
  const shimConfig = parseShimConfig([], env);
  const edgeConfig = parseEdgeConfig(edgeArgs, env);
  if (shimConfig.port === 0 || edgeConfig.port === 0) {
    throw new AppError('INVALID_ARGUMENT', 'bun run start needs fixed ports for the shim and the edge page (port 0 is for running them separately)');
  }
  const shimAddress = hostPort(wildcard(shimConfig.host) ? '127.0.0.1' : shimConfig.host, shimConfig.port);
  const cloudChosen = env.EDGE_CLOUD !== undefined || edgeConfig.cloud !== DEFAULT_EDGE_CONFIG.cloud;
  const defaults = pairDefaults(pair, env, {
    edgeModel: edgeConfig.edgeModel !== DEFAULT_EDGE_CONFIG.edgeModel,
    router: edgeConfig.router !== DEFAULT_EDGE_CONFIG.router,
    // Another backend's model pack is only its tokenizer, and the shim has none by default.
    shimModel: shimConfig.backend !== 'embedded' || shimConfig.modelPack !== DEMO.cloudPack,
  });
  const edgeEnv = { ...env, ...defaults.edge, ...(cloudChosen ? {} : { EDGE_CLOUD: shimAddress }) };
  const shimEnv = { ...env, ...defaults.shim };

  if (signals === 0) {
    // The pack builder writes each pack atomically: stopped half-way, it leaves no half-written pack.
    const builder = Bun.spawn(['bun', join(PROJECT_ROOT, 'src/tools/models/cli.ts'), 'demo', '--pair', pair], { stdout: 'inherit', stderr: 'inherit' });
    running.builder = builder;
    const code = await builder.exited;
    running.builder = undefined;
    // A signal to the process group can end the builder before the launcher's own handler has run: wait for it.
    const signalled = builder.signalCode !== null || code === 128 + 2 || code === 128 + 15;
    if (signals === 0 && code !== 0 && signalled) await Promise.race([stopped, Bun.sleep(SIGNAL_GRACE_MS)]);
    if (signals === 0 && code !== 0) throw new AppError('INTERNAL', `building the demo packs failed (exit code ${code})`);
  }
  if (signals > 0) {
    print('stopped before the servers started');
    return 0;
  }

  const shim = new SupervisedChild({ name: 'cloud shim', command: ['bun', join(PROJECT_ROOT, 'src/cloud/main.ts')], env: shimEnv }, print);
  const edge = new SupervisedChild({ name: 'edge', command: ['bun', join(PROJECT_ROOT, 'src/edge/main.ts'), ...edgeArgs], env: edgeEnv }, print);
  running.children = [shim, edge];

  const host = wildcard(edgeConfig.host) ? 'localhost' : edgeConfig.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${edgeConfig.port}/`;
  const couldNotStart = Promise.race(running.children.map((child, i) => child.ended.then(() => i)));
  const first = await Promise.race([
    Promise.all([shim.firstReady, edge.firstReady]).then(() => 'ready' as const),
    couldNotStart,
    stopped.then(() => 'stopping' as const),
  ]);
  if (first === 'ready') {
    const grpc = edgeConfig.grpcPort >= 0 ? `edge gRPC on :${edgeConfig.grpcPort}, ` : '';
    print(`\nEdge token router is up: ${url}  (${grpc}cloud shim on ${shimAddress})\n`);
  }
  // Serving until a signal, or until a child ended before it served.
  const ended = await Promise.race([stopped.then(() => undefined), couldNotStart]);
  stopAll();
  const ends = await Promise.all(running.children.map((child) => child.ended));
  clearTimeout(forceTimer);
  running.children.forEach((child, i) => print(`${child.name} ${ends[i]!.description}`));
  if (ended !== undefined && !ends[ended]!.clean) console.error(`error: the ${running.children[ended]!.name} could not start`);
  return ends.every((end) => end.clean) ? 0 : 1;
}

try {
  process.exit(await main());
} catch (e) {
  console.error(`error: ${errorMessage(e)}`);
  killAll();
  process.exit(1);
}
