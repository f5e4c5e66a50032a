/**
 * onnxruntime's telemetry stays off in every process that loads it. On Linux, onnxruntime-node 1.30 writes
 * a device id and an SQLite event store under `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` unless
 * ORT_DISABLE_TELEMETRY is in the C environment when it starts. Each entry point that runs an ONNX session
 * is started here as a child process in a sandbox (fresh HOME, TMPDIR and working folder, no
 * ORT_DISABLE_TELEMETRY and no XDG_CACHE_HOME in its environment), made to run a real inference, and the
 * sandbox must stay empty. A control run that loads onnxruntime-node directly shows the check is real.
 *
 * onnxruntime also keeps quiet by itself when it sees a CI service's marker variable, so the sandbox drops
 * those too: otherwise on a CI machine the control writes nothing and the other checks prove nothing.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import { Glob } from 'bun';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

/** Where onnxruntime puts its telemetry under HOME (seen in the control run below). */
const TELEMETRY_DIR = '.cache/Microsoft/DeveloperTools/.onnxruntime';

/**
 * The variables whose presence turns onnxruntime-node 1.30's telemetry off (`CI`, and the names listed
 * beside the telemetry code in libonnxruntime.so; each one alone silences the control run).
 */
const CI_MARKERS = [
  'CI',
  'TF_BUILD',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'CIRCLECI',
  'TRAVIS',
  'JENKINS_URL',
  'CODEBUILD_BUILD_ID',
  'BUILDKITE',
  'TEAMCITY_VERSION',
  'APPVEYOR',
  'BITBUCKET_BUILD_NUMBER',
];

interface Sandbox {
  root: string;
  home: string;
  cwd: string;
  tmp: string;
  env: Record<string, string>;
  /** Every file and folder the child left in HOME, TMPDIR and its working folder. */
  leftovers(): string[];
}

const sandboxes: Sandbox[] = [];
const children: Bun.Subprocess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    child.kill('SIGKILL');
    await child.exited;
  }
  for (const box of sandboxes.splice(0)) rmSync(box.root, { recursive: true, force: true });
});

function sandbox(): Sandbox {
  const root = mkdtempSync(join(tmpdir(), 'ort-telemetry-'));
  const [home, cwd, tmp] = ['home', 'cwd', 'tmp'].map((d) => join(root, d));
  for (const dir of [home!, cwd!, tmp!]) mkdirSync(dir);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  delete env.ORT_DISABLE_TELEMETRY;
  delete env.XDG_CACHE_HOME; // so onnxruntime would fall back to HOME/.cache
  for (const marker of CI_MARKERS) delete env[marker];
  Object.assign(env, { HOME: home!, TMPDIR: tmp!, BUN_RUNTIME_TRANSPILER_CACHE_PATH: '0' }); // bun's own cache lives in HOME too
  const box: Sandbox = {
    root,
    home: home!,
    cwd: cwd!,
    tmp: tmp!,
    env,
    leftovers: () => [home!, cwd!, tmp!].flatMap((dir) => readdirSync(dir, { recursive: true }).map((f) => join(relative(root, dir), String(f)))).sort(),
  };
  sandboxes.push(box);
  return box;
}

function spawn(box: Sandbox, args: string[]): Bun.Subprocess<'ignore', 'pipe', 'pipe'> {
  const child = Bun.spawn(['bun', ...args], { cwd: box.cwd, env: box.env, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  children.push(child);
  return child;
}

/** Reads `stream` until `pattern` matches the text so far; the rest of the stream is drained in the background. */
async function waitForOutput(stream: ReadableStream<Uint8Array>, pattern: RegExp, what: string): Promise<RegExpMatchArray> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (true) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${what} ended before printing ${pattern}:\n${text}`);
    text += decoder.decode(value, { stream: true });
    const match = text.match(pattern);
    if (match) {
      void (async () => {
        while (!(await reader.read()).done);
      })();
      return match;
    }
  }
}

/** Runs a child to its end; returns its output, failing with stderr when it exits non-zero. */
async function runToEnd(box: Sandbox, args: string[]): Promise<string> {
  const child = spawn(box, args);
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`bun ${args.join(' ')} exited with ${code}:\n${stderr}`);
  return stdout;
}

test('nothing under src or tests imports onnxruntime-node except src/shared/model/ort.ts', () => {
  const importsOrt = /(?:from\s*|import\s*\(\s*|require\s*\(\s*|import\s+)['"]onnxruntime-node(?:\/[^'"]*)?['"]/;
  const offenders: string[] = [];
  for (const folder of ['src', 'tests', 'views', 'scripts']) {
    for (const file of new Glob('**/*.{ts,tsx,js,mjs,cjs}').scanSync({ cwd: join(PROJECT_ROOT, folder), onlyFiles: true })) {
      const path = `${folder}/${file}`;
      if (path !== 'src/shared/model/ort.ts' && importsOrt.test(readFileSync(join(PROJECT_ROOT, path), 'utf8'))) offenders.push(path);
    }
  }
  expect(offenders).toEqual([]);
  // The pattern does find the import it looks for.
  expect(importsOrt.test(readFileSync(join(PROJECT_ROOT, 'src/shared/model/ort.ts'), 'utf8'))).toBe(true);
});

test('control: onnxruntime-node loaded without the variable writes its telemetry files into HOME', async () => {
  const box = sandbox();
  const { routerPack } = await ensureDemoPacks();
  const ortEntry = Bun.resolveSync('onnxruntime-node', PROJECT_ROOT);
  const script = `
    const ort = (await import(${JSON.stringify(ortEntry)})).default;
    const session = await ort.InferenceSession.create(${JSON.stringify(join(routerPack, 'router.onnx'))});
    // The demo router reads the previous position's hidden state, 9 extra features (logit statistics,
    // repetition, position) and the proposed token beside the hidden state.
    const out = await session.run({
      hidden_states: new ort.Tensor('float32', new Float32Array(64), [1, 64]),
      previous_hidden_states: new ort.Tensor('float32', new Float32Array(64), [1, 64]),
      extra_features: new ort.Tensor('float32', new Float32Array(9), [1, 9]),
      proposed_token: new ort.Tensor('int64', BigInt64Array.of(3n), [1]),
    });
    console.log(out.score.data.length);
    await session.release();`;
  expect((await runToEnd(box, ['-e', script])).trim()).toBe('1');
  expect(box.leftovers()).toContain(join('home', TELEMETRY_DIR, 'deviceid'));
});

test('src/shared/model/ort.ts puts ORT_DISABLE_TELEMETRY=1 into the C environment before onnxruntime loads', async () => {
  const box = sandbox();
  const script = `
    import { dlopen, FFIType } from 'bun:ffi';
    const libc = dlopen('libc.so.6', { getenv: { args: [FFIType.cstring], returns: FFIType.cstring } });
    const getenv = (name) => String(libc.symbols.getenv(new TextEncoder().encode(name + '\\0')));
    const before = getenv('ORT_DISABLE_TELEMETRY');
    const { ort } = await import(${JSON.stringify(join(PROJECT_ROOT, 'src/shared/model/ort.ts'))});
    console.log(JSON.stringify({ before, after: getenv('ORT_DISABLE_TELEMETRY'), js: process.env.ORT_DISABLE_TELEMETRY, loaded: typeof ort.InferenceSession.create }));`;
  const seen = JSON.parse(await runToEnd(box, ['-e', script]));
  expect(seen).toEqual({ before: 'null', after: '1', js: '1', loaded: 'function' });
});

describe('entry points that run ONNX sessions write no telemetry', () => {
  test('the edge (bun run edge): a generation through its HTTP API', async () => {
    const box = sandbox();
    const demo = await ensureDemoPacks();
    // Run from the sandbox folder: the JSX files name their JSX source themselves, so no tsconfig is needed there.
    const edge = spawn(box, [
      join(PROJECT_ROOT, 'src/edge/main.ts'),
      ...['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', 'none', '--edge-model', demo.edgePack, '--router', demo.routerPack],
    ]);
    const [, url] = await waitForOutput(edge.stdout, /edge page: (\S+)\n/, 'the edge');
    const res = await fetch(`${url}api/generate`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Once upon a time', mode: 'joint', max_new_tokens: 4 }),
      headers: { 'content-type': 'application/json' },
    });
    const body = await res.text();
    expect(body).toContain('event: done');
    expect(body.match(/event: token/g)).toHaveLength(4);
    edge.kill('SIGTERM');
    expect(await edge.exited).toBe(0);
    expect(box.leftovers()).toEqual([]);
  });

  test('the cloud shim (bun run shim): a routed step on the embedded model', async () => {
    const box = sandbox();
    const shim = spawn(box, [
      join(PROJECT_ROOT, 'src/cloud/main.ts'),
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--model-pack',
      (await ensureDemoPacks()).cloudPack,
    ]);
    const [, address] = await waitForOutput(shim.stderr, /"shim listening".*?"address":"([^"]+)"/, 'the shim');
    const client = new GrpcCloudClient({ address: address!, stepTimeoutMs: 10_000 });
    try {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'telemetry' });
      const reply = await conversation.next({
        context: [1],
        sources: ['prompt'],
        tokenIndex: 0,
        maxTokens: 2,
        temperature: 0,
        topP: 1,
        stopTokenIds: [2],
        routerScore: 0,
        threshold: 1,
        topLogprobs: 0,
      });
      expect(reply.tokens).toEqual([403, 407]);
      await conversation.close();
    } finally {
      await client.close();
    }
    shim.kill('SIGTERM');
    expect(await shim.exited).toBe(0);
    expect(box.leftovers()).toEqual([]);
  });

  test('a tool (bun run router eval): both models and the router over a short text', async () => {
    const box = sandbox();
    const demo = await ensureDemoPacks();
    const text = join(box.root, 'text.txt'); // beside the sandbox folders, not in them
    await Bun.write(
      text,
      'Once upon a time, there was a little girl named Lily. She loved to play outside.\n\nOne day, a big dog came to the park. The dog was happy and ran around.\n\nThe sun was warm and the birds sang. Everyone was happy that day.\n',
    );
    const out = await runToEnd(box, [
      join(PROJECT_ROOT, 'src/tools/router/cli.ts'),
      ...[
        'eval',
        '--router',
        demo.routerPack,
        '--edge-model',
        demo.edgePack,
        '--cloud-model',
        demo.cloudPack,
        '--text',
        text,
        '--train-fraction',
        '0.5',
        '--json',
      ],
    ]);
    const curve = JSON.parse(out.trim().split('\n').at(-1)!) as { positions: number; points: { threshold: number }[] };
    expect(curve.positions).toBeGreaterThan(0);
    expect(curve.points.at(-1)!.threshold).toBe(1);
    expect(box.leftovers()).toEqual([]);
  });
});
