/**
 * docs/clients.md's Python example (examples/python/edge_generate.py) against a real edge gRPC server on
 * loopback, with modules generated the way docs/clients.md says: Debian's protoc and grpc_python_plugin, the
 * health proto compiled from its own folder (so no `grpc/` package of generated code sits beside the
 * real `grpc` module), and Debian's python3-grpcio. scripts/setup.sh installs those packages.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EdgeChat } from '../src/edge/chat/edge-chat.ts';
import { EdgeGrpcServer } from '../src/edge/grpc/edge-grpc-server.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

/** Debian's interpreter, where python3-grpcio installs (a pyenv or venv python3 on PATH may lack it). */
const PYTHON = '/usr/bin/python3';
const PLUGIN = '/usr/bin/grpc_python_plugin';
const TOKEN = 'py-s3cret';

let edge: TestEdge;
let server: EdgeGrpcServer;
let address: string;
let generated: string;

async function run(cmd: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn(cmd, { cwd: PROJECT_ROOT, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

beforeAll(async () => {
  for (const [path, pkg] of [
    [PYTHON, 'python3'],
    ['/usr/bin/protoc', 'protobuf-compiler'],
    [PLUGIN, 'protobuf-compiler-grpc'],
  ] as const) {
    if (!existsSync(path)) throw new Error(`${path} is missing: apt-get install ${pkg} (./scripts/setup.sh does)`);
  }
  const probe = await run([PYTHON, '-c', 'import grpc, google.protobuf']);
  if (probe.code !== 0) throw new Error(`Debian's python3-grpcio is missing (./scripts/setup.sh installs it): ${probe.stderr}`);
  generated = mkdtempSync(join(tmpdir(), 'edge-python-'));
  const out = [`--python_out=${generated}`, `--grpc_out=${generated}`, `--plugin=protoc-gen-grpc=${PLUGIN}`];
  for (const args of [
    ['-I', 'proto', 'edge_generator.proto'],
    ['-I', 'proto/grpc/health/v1', 'health.proto'],
  ]) {
    const protoc = await run(['protoc', ...args, ...out]);
    expect(protoc).toMatchObject({ code: 0, stderr: '' });
  }
  edge = await startTestEdge({ maxConcurrent: 2 });
  server = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, accessToken: TOKEN, maxReceiveBytes: 64 * 1024 });
  address = `127.0.0.1:${await server.start()}`;
});

afterAll(async () => {
  await server?.shutdown(1000);
  await edge?.release();
  if (generated) rmSync(generated, { recursive: true, force: true });
});

const example = (...args: string[]) =>
  run([PYTHON, 'examples/python/edge_generate.py', ...args, '--address', address], { PYTHONPATH: generated, PYTHONDONTWRITEBYTECODE: '1' });

test('the Python example streams the same generation as the edge itself, cloud tokens marked', async () => {
  const direct = edge.runtime.start({ prompt: 'Once upon a time', mode: 'joint', threshold: 0.9, maxNewTokens: 12 });
  let expected = '';
  let routed = 0;
  for await (const event of direct.events()) {
    if (event.type === 'token') expected += event.source === 'llm' ? `[${event.text}]` : event.text;
    else routed = event.metrics.routed;
  }
  expect(routed).toBeGreaterThan(0);
  const result = await example('Once upon a time', '--threshold', '0.9', '--max-new-tokens', '12', '--mark', '--token', TOKEN);
  expect(result).toEqual({ code: 0, stderr: '', stdout: `health: SERVING\n${expected}\ndone: length, 12 tokens, ${routed} routed, 0 fallback\n` });
});

test("without --threshold the request leaves τ out, so the router's default applies; with it, τ is sent", async () => {
  const received: (number | undefined)[] = [];
  const start = edge.runtime.start.bind(edge.runtime);
  edge.runtime.start = (raw, ...rest) => {
    received.push(raw.threshold as number | undefined);
    return start(raw, ...rest);
  };
  try {
    for (const args of [[], ['--threshold', '0.25']]) {
      const result = await example('Once upon a time', '--max-new-tokens', '2', '--token', TOKEN, ...args);
      expect(result).toMatchObject({ code: 0, stderr: '' });
    }
  } finally {
    edge.runtime.start = start;
  }
  expect(received).toEqual([undefined, 0.25]);
});

test('refusals come back as the gRPC status with the documented field names', async () => {
  expect(await example('Hi', '--max-new-tokens', '0', '--token', TOKEN)).toEqual({
    code: 1,
    stdout: 'health: SERVING\n',
    stderr: 'error: INVALID_ARGUMENT: max_new_tokens must be an integer in [1, 1024], got 0\n',
  });
  expect(await example('Hi', '--token', 'wrong')).toEqual({ code: 1, stdout: 'health: SERVING\n', stderr: 'error: UNAUTHENTICATED: invalid bearer token\n' });
  const unreachable = await run([PYTHON, 'examples/python/edge_generate.py', 'Hi', '--address', '127.0.0.1:1'], {
    PYTHONPATH: generated,
    PYTHONDONTWRITEBYTECODE: '1',
  });
  expect(unreachable.code).toBe(1);
  expect(unreachable.stderr).toStartWith('error: UNAVAILABLE: ');
});

test("--chat sends a conversation: the same reply as the edge generates from the template's rendering of it", async () => {
  // ChatML over the demo tokenizer: the edge's --chat-template chatml, rendered as plain text.
  const chat = EdgeChat.load(edge.runtime.engine.tokenizer, { template: 'chatml', modelName: 'demo' });
  const chatServer = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, maxReceiveBytes: 64 * 1024, chat });
  const chatAddress = `127.0.0.1:${await chatServer.start()}`;
  try {
    const messages = [
      { role: 'system' as const, content: 'You tell stories.' },
      { role: 'user' as const, content: 'A story' },
    ];
    const { text, ids } = chat.prompt(messages);
    let expected = '';
    for await (const event of edge.runtime.start({ prompt: text, mode: 'small_only', maxNewTokens: 6 }, undefined, ids).events())
      if (event.type === 'token') expected += event.text;
    const result = await run(
      [
        PYTHON,
        'examples/python/edge_generate.py',
        'A story',
        '--chat',
        '--system',
        'You tell stories.',
        '--mode',
        'small_only',
        '--max-new-tokens',
        '6',
        '--address',
        chatAddress,
      ],
      { PYTHONPATH: generated, PYTHONDONTWRITEBYTECODE: '1' },
    );
    expect(result).toEqual({ code: 0, stderr: '', stdout: `health: SERVING\n${expected}\ndone: length, 6 tokens, 0 routed, 0 fallback\n` });
  } finally {
    await chatServer.shutdown(1000);
  }
});
