import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import { interceptSteps } from '../src/edge/cloud/cloud-client.ts';
import { EdgeGrpcServer } from '../src/edge/grpc/edge-grpc-server.ts';
import { EdgeGeneratorClient, type EdgeGeneratorClientType, type GenerateEvent__Output, type GenerateRequest } from '../src/edge/grpc/edge-proto.ts';
import { shortestFloat32 } from '../src/shared/model/float32.ts';
import { HealthClient } from '../src/shared/grpc/proto.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

let edge: TestEdge;
let server: EdgeGrpcServer;
let client: EdgeGeneratorClientType;
let address: string;
/** The τ of every routed step the edge sent its cloud, and its log lines: what a request's threshold became. */
const stepThresholds: number[] = [];
const logLines: Record<string, unknown>[] = [];

beforeAll(async () => {
  // A cloud that answers after 20 ms, as over a network: long enough for the edge to decode past a routed token.
  edge = await startTestEdge({
    maxConcurrent: 2,
    cloud: (inProcess) => interceptSteps(inProcess, async (request, next) => (stepThresholds.push(request.threshold), await Bun.sleep(20), next(request))),
    log: createLogger('edge', 'info', (line) => logLines.push(JSON.parse(line))),
    // As `bun run edge` by default: a request that does not say speculates.
    speculateByDefault: true,
    promptCacheBytes: 16 * 2 ** 20,
  });
  server = new EdgeGrpcServer(edge.runtime, { host: '127.0.0.1', port: 0, accessToken: 'tok', maxReceiveBytes: 64 * 1024 });
  address = `127.0.0.1:${await server.start()}`;
  client = new EdgeGeneratorClient(address, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client.close();
  await server.shutdown(1000);
  await edge.release();
});

function auth(token = 'tok'): grpc.Metadata {
  const m = new grpc.Metadata();
  m.set('authorization', `Bearer ${token}`);
  return m;
}

async function collect(request: GenerateRequest, metadata = auth()): Promise<{ events: GenerateEvent__Output[]; error?: grpc.ServiceError }> {
  const events: GenerateEvent__Output[] = [];
  const call = client.Generate(request, metadata, { deadline: Date.now() + 30_000 });
  try {
    for await (const e of call as AsyncIterable<GenerateEvent__Output>) events.push(e);
    return { events };
  } catch (error) {
    return { events, error: error as grpc.ServiceError };
  }
}

test('Generate streams the same events as the loop: tokens then done', async () => {
  const { events, error } = await collect({ prompt: 'Once upon a time', mode: 'joint', threshold: 0.6, maxNewTokens: 16 });
  expect(error).toBeUndefined();
  const tokens = events.filter((e) => e.token).map((e) => e.token!);
  expect(tokens).toHaveLength(16);
  const done = events.at(-1)!.done!;
  expect(done.finishReason).toBe('length');
  expect(done.metrics!.routed).toBe(tokens.filter((t) => t.source === 'llm').length);
  expect(done.metrics!.routed).toBeGreaterThan(0);
  expect(done.text).toBe(tokens.map((t) => t.text).join(''));
  for (const t of tokens) expect(t.source).toBe(t.score! < 0.6 ? 'llm' : 'slm');
});

test('private spans over gRPC: the cloud reads placeholders; Done says what it saw and what left', async () => {
  const prompt = 'Once upon a time Zenobia met Quillon. Zenobia';
  const { events, error } = await collect({
    prompt,
    mode: 'llm_only',
    maxNewTokens: 4,
    privateSpans: [
      { start: 17, end: 24, kind: 'name' },
      { start: 29, end: 36, kind: '' },
    ],
  });
  expect(error).toBeUndefined();
  const done = events.at(-1)!.done!;
  expect(done.cloudText).toStartWith('Once upon a time [NAME_1] met [PRIVATE_1]. [NAME_1]');
  expect(done.metrics!.cloud).toMatchObject({ placeholders: 2, hiddenStateBytes: '0', streams: 1 });
  expect(Number(done.metrics!.cloud!.bytesSent)).toBeGreaterThan(0);
  expect(done.metrics!.cloud!.tokensSent).toBeGreaterThan(0);
});

test("Done's metrics carry the prompt tokens restored from the prompt cache", async () => {
  const request = { prompt: 'The cat sat on the warm mat and', mode: 'joint', threshold: 0.6, maxNewTokens: 4 };
  const promptTokens = edge.runtime.engine.tokenizer.encode(request.prompt, { addBos: true, parseSpecialTokens: false }).length;
  await collect(request);
  const again = await collect(request);
  expect(again.events.at(-1)!.done!.metrics).toMatchObject({ promptTokens, cachedTokens: promptTokens - 2 });
});

test('speculate over gRPC: the edge default (on) unless the request says off; the same tokens, and the speculation figures in done', async () => {
  const request = { prompt: 'Once upon a time', mode: 'joint', threshold: 0.8, maxNewTokens: 24 };
  const plain = await collect({ ...request, speculate: false });
  const speculative = await collect(request);
  expect(speculative.error).toBeUndefined();
  const ids = (r: typeof plain) => r.events.filter((e) => e.token).map((e) => [e.token!.id, e.token!.source]);
  expect(ids(speculative)).toEqual(ids(plain));
  const off = plain.events.at(-1)!.done!.metrics!;
  const on = speculative.events.at(-1)!.done!.metrics!;
  expect(off.speculated).toBe(0);
  // Every routed token but one at the very end is decoded past while its step is on the network.
  expect(on.routed).toBeGreaterThan(0);
  expect(on.speculated).toBeGreaterThanOrEqual(on.routed - 1);
  expect(on.speculationHits).toBeLessThanOrEqual(on.speculated);
  expect(on.hitRate).toBeCloseTo(on.speculated ? on.speculationHits / on.speculated : 0, 5);
  expect(on.wastedSteps + on.speculationHits).toBeGreaterThan(0);
});

test('a float field reads as the decimal that was sent: τ 0.8 reaches the log and the cloud as 0.8, not 0.800000011920929', async () => {
  stepThresholds.length = 0;
  logLines.length = 0;
  const { events, error } = await collect({
    prompt: 'Once upon a time',
    mode: 'joint',
    threshold: 0.8,
    temperature: 0.7,
    topP: 0.9,
    seed: 1,
    maxNewTokens: 16,
  });
  expect(error).toBeUndefined();
  expect(logLines.find((l) => l.msg === 'generation started')).toMatchObject({ threshold: 0.8 });
  expect(stepThresholds.length).toBeGreaterThan(0);
  expect(new Set(stepThresholds)).toEqual(new Set([0.8]));
  // The done event goes back as a float again; what the edge put in it was 0.8.
  expect(events.at(-1)!.done!.metrics!.budget).toMatchObject({ policy: 'threshold', threshold: Math.fround(0.8), cut: Math.fround(0.8) });
});

test('shortestFloat32: the shortest decimal that is the same float32', () => {
  const cases: [number, number][] = [
    [0.8, 0.8],
    [0.1, 0.1],
    [0.95, 0.95],
    [1 / 3, 0.33333334],
    [0.5, 0.5],
    [1, 1],
    [0, 0],
    [123456.789, 123456.79],
    [16777217, 16777216],
  ];
  for (const [sent, read] of cases) expect([sent, shortestFloat32(Math.fround(sent))]).toEqual([sent, read]);
  // Every value is the float32 it came as: nothing but the printing changes.
  for (const [sent] of cases) expect(Math.fround(shortestFloat32(Math.fround(sent)))).toBe(Math.fround(sent));
  expect(Object.is(shortestFloat32(-0), -0)).toBe(true);
  expect(shortestFloat32(Number.NaN)).toBeNaN();
  expect(shortestFloat32(Number.POSITIVE_INFINITY)).toBe(Number.POSITIVE_INFINITY);
});

test('small_only over gRPC equals small_only through the runtime directly', async () => {
  const viaGrpc = await collect({ prompt: 'The dog', mode: 'small_only', maxNewTokens: 12 });
  const direct = edge.runtime.start({ prompt: 'The dog', mode: 'small_only', maxNewTokens: 12 });
  const ids: number[] = [];
  for await (const e of direct.events()) if (e.type === 'token') ids.push(e.id);
  expect(viaGrpc.events.filter((e) => e.token).map((e) => e.token!.id)).toEqual(ids);
});

test("a constraint over gRPC: Done's metrics carry its counts, as the loop reports them; none without one", async () => {
  // Every token routed, and choices the story model would never write: the cloud's tokens are replaced.
  const request = { prompt: 'Once upon a time', mode: 'llm_only', maxNewTokens: 8, choice: ['Zq', 'Xv'] };
  const { events, error } = await collect(request);
  expect(error).toBeUndefined();
  const done = events.at(-1)!.done!;
  expect(['Zq', 'Xv']).toContain(done.text);
  const counts = done.metrics!.constraint!;
  expect(counts.cloudTokensReplaced).toBeGreaterThan(0);
  expect(counts.cloudTokensReplaced).toBeGreaterThanOrEqual(counts.constrainedFallbacks);
  const direct = edge.runtime.start({ ...request, constraint: { choice: request.choice } });
  let metrics: Record<string, unknown> | undefined;
  for await (const e of direct.events()) if (e.type === 'done') metrics = e.metrics as unknown as Record<string, unknown>;
  expect(counts).toEqual(metrics!.constraint as typeof counts);
  const free = await collect({ prompt: 'Once upon a time', mode: 'llm_only', maxNewTokens: 2 });
  expect(free.events.at(-1)!.done!.metrics!.constraint).toBeNull();
});

describe('errors are gRPC statuses with messages', () => {
  const cases: [GenerateRequest, grpc.status, RegExp][] = [
    [{ prompt: '' }, grpc.status.INVALID_ARGUMENT, /prompt must not be empty/],
    [{ prompt: 'x', threshold: 1.5 }, grpc.status.INVALID_ARGUMENT, /threshold must be in \[0, 1\]/],
    [{ prompt: 'x', threshold: Number.NaN }, grpc.status.INVALID_ARGUMENT, /threshold must be a number/],
    [{ prompt: 'x', mode: 'turbo' }, grpc.status.INVALID_ARGUMENT, /mode must be one of/],
    [{ prompt: 'x', maxNewTokens: 0 }, grpc.status.INVALID_ARGUMENT, /max_new_tokens must be an integer in \[1, 1024\]/],
  ];
  for (const [request, code, message] of cases) {
    test(JSON.stringify(request), async () => {
      const { error } = await collect(request);
      expect(error?.code).toBe(code);
      expect(error?.details).toMatch(message);
    });
  }

  test('missing or wrong bearer token: UNAUTHENTICATED', async () => {
    expect((await collect({ prompt: 'x' }, new grpc.Metadata())).error?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await collect({ prompt: 'x' }, auth('nope'))).error?.code).toBe(grpc.status.UNAUTHENTICATED);
  });

  test('a message above the size limit: RESOURCE_EXHAUSTED, and the server keeps serving', async () => {
    const { error } = await collect({ prompt: 'x'.repeat(100_000) });
    expect(error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const ok = await collect({ prompt: 'Hi', maxNewTokens: 2, mode: 'small_only' });
    expect(ok.error).toBeUndefined();
  });
});

test('cancelling the call stops the generation and frees its slot', async () => {
  const call = client.Generate({ prompt: 'Once upon a time', mode: 'joint', threshold: 0.6, maxNewTokens: 400 }, auth());
  let tokens = 0;
  const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
    call.on('data', (e: GenerateEvent__Output) => {
      if (e.token && ++tokens === 3) call.cancel();
    });
    call.on('error', (err: grpc.ServiceError) => resolve(err));
    call.on('end', () => resolve(undefined));
  });
  expect((await ended)?.code).toBe(grpc.status.CANCELLED);
  for (let i = 0; i < 50 && edge.runtime.activeCount > 0; i++) await Bun.sleep(20);
  expect(edge.runtime.activeCount).toBe(0);
  expect(edge.edgeModel.stats.liveSequences).toBe(0);
});

test('health service reports SERVING', async () => {
  const health = new HealthClient(address, grpc.credentials.createInsecure());
  const reply = await new Promise<{ status: string }>((resolve, reject) =>
    health.Check({ service: 'tokenrouter.edge.v1.EdgeGenerator' }, (err, r) => (err ? reject(err) : resolve(r as { status: string }))),
  );
  health.close();
  expect(reply.status).toBe('SERVING');
});

describe('the command-line client', () => {
  async function runClient(...args: string[]) {
    const proc = Bun.spawn(['bun', 'src/tools/client.ts', ...args], { stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  }

  test('prints the generated text and the metrics line', async () => {
    const r = await runClient('Once upon a time', '--address', address, '--token', 'tok', '--mode', 'small_only', '--max-new-tokens', '10');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const direct = edge.runtime.start({ prompt: 'Once upon a time', mode: 'small_only', maxNewTokens: 10 });
    let text = '';
    for await (const e of direct.events()) if (e.type === 'done') text = e.text;
    expect(r.stdout.startsWith(text)).toBe(true);
    expect(r.stdout).toMatch(/10 tokens, 0 routed \(0\.0%\), 0 fallback .* finished: length/);
  });

  test('--json prints one event per line; errors exit non-zero with the message', async () => {
    const r = await runClient('Hi', '--address', address, '--token', 'tok', '--threshold', '1', '--max-new-tokens', '3', '--json');
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(4);
    expect(lines.slice(0, 3).every((e) => e.token?.source === 'llm')).toBe(true);
    const bad = await runClient('Hi', '--address', address, '--token', 'tok', '--threshold', '7');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: .*threshold must be in \[0, 1\]/);
    // Numbers are read as the edge reads a form's: Number() would take hex and padded text.
    const loose = await runClient('Hi', '--address', address, '--top-p', '0x1');
    expect(loose.code).toBe(2);
    expect(loose.stderr).toStartWith('error: --top-p must be a number, got "0x1"');
    const maybe = await runClient('Hi', '--address', address, '--speculate', 'maybe');
    expect(maybe.code).toBe(2);
    expect(maybe.stderr).toStartWith('error: --speculate must be on or off, got "maybe"');
  });

  test('--speculate off reaches the edge (no speculation figures); without it the edge default (on) applies', async () => {
    const args = ['Once upon a time', '--address', address, '--token', 'tok', '--threshold', '0.8', '--max-new-tokens', '24', '--json'];
    const done = async (...extra: string[]) => {
      const r = await runClient(...args, ...extra);
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout.trim().split('\n').at(-1)!).done.metrics;
    };
    expect((await done('--speculate', 'off')).speculated).toBe(0);
    expect((await done()).speculated).toBeGreaterThan(0);
  });
});
