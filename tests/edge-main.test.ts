/**
 * `bun run edge` as a real process against a real shim on loopback: it reports ready, logs each
 * generation, and on SIGTERM turns /readyz to 503 and its gRPC health to NOT_SERVING, refuses new work, ends the running HTTP and gRPC
 * streams with an explicit final `error` event (UNAVAILABLE, "the edge is shutting down") rather than a
 * cut connection, still answers the page that opens its stream late, ignores a repeated SIGTERM, and
 * exits 0.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { Backend } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { EdgeGeneratorClient, type EdgeGeneratorClientType, type GenerateEvent__Output } from '../src/edge/grpc/edge-proto.ts';
import { HealthClient } from '../src/shared/grpc/proto.ts';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { cloudPackDir, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { collectOutput, exitWithin, jsonLines } from './helpers/process-output.ts';
import { readSse } from './helpers/sse-client.ts';

/** The embedded backend, slowed down per step, so that a generation is still running when SIGTERM comes. */
function slowBackend(inner: Backend, delayMs: number): Backend {
  return {
    info: inner.info,
    openSequence(id) {
      const session = inner.openSequence(id);
      return {
        async step(request) {
          await Bun.sleep(delayMs);
          return session.step(request);
        },
        dispose: () => session.dispose(),
      };
    },
    close: () => inner.close(),
  };
}

let shim: ShimServer;

beforeAll(async () => {
  const backend = await EmbeddedBackend.load({ modelPack: await cloudPackDir(), maxLiveSequences: 8 });
  shim = await startTestShim({}, { backend: slowBackend(backend, 25) });
});

afterAll(async () => {
  await shim?.shutdown(1000);
});

/** Calls `attempt` until it returns a value (bounded); each call finishes before the next starts. */
async function poll<T>(attempt: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    const value = await attempt();
    if (value !== undefined) return value;
    await Bun.sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('SIGTERM mid-generation: readiness 503, streams end with a final UNAVAILABLE event, exit 0', async () => {
  const edge = Bun.spawn(
    ['bun', 'src/edge/main.ts', '--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--cloud', shim.address, '--log-level', 'info'],
    { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' },
  );
  const stderr = collectOutput(edge.stderr);
  const stdout = collectOutput(edge.stdout);
  let client: EdgeGeneratorClientType | undefined;
  let health: InstanceType<typeof HealthClient> | undefined;
  try {
    const ready = JSON.parse(await stderr.waitForLine((l) => l.includes('"edge ready"'), 60_000, 'the edge to start')) as { url: string; grpcPort: number };
    const base = ready.url.replace(/\/$/, '');
    expect(await stdout.waitForLine((l) => l.startsWith('edge page: '), 5_000)).toBe(`edge page: ${ready.url}`);
    const readyz = await fetch(`${base}/readyz`);
    expect(readyz.status).toBe(200);
    expect(await readyz.json()).toMatchObject({ ready: true, active: 0 });

    // Two long generations, one per entry point, each 400 tokens of ≥ 25 ms: still running at SIGTERM.
    const request = { prompt: 'Once upon a time', mode: 'llm_only', maxNewTokens: 400 };
    const body = JSON.stringify({ prompt: request.prompt, mode: request.mode, max_new_tokens: request.maxNewTokens });
    const http = readSse(await fetch(`${base}/api/generate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }));
    client = new EdgeGeneratorClient(`127.0.0.1:${ready.grpcPort}`, grpc.credentials.createInsecure());
    const call = client.Generate(request, { deadline: Date.now() + 60_000 });
    const grpcEvents: GenerateEvent__Output[] = [];
    call.on('data', (e: GenerateEvent__Output) => grpcEvents.push(e));
    const grpcStatus = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {}); // the status above carries it
    await http.waitFor((events) => events.filter((e) => e.event === 'token').length >= 3, 20_000, 'HTTP tokens');
    await waitFor(() => grpcEvents.filter((e) => e.token).length >= 3, 20_000, 'gRPC tokens');

    // A page run whose stream the browser has not opened yet: shutdown waits for it (bounded).
    const form = new URLSearchParams({ prompt: 'The little dog', mode: 'small_only', max_new_tokens: '8' });
    const panel = await (await fetch(`${base}/runs`, { method: 'POST', body: form })).text();
    const runId = panel.match(/id="run-([0-9a-f-]+)"/)?.[1];
    expect(runId).toBeDefined();

    edge.kill('SIGTERM');
    const notReady = await poll(
      async () => {
        const res = await fetch(`${base}/readyz`);
        return res.status === 503 ? res : undefined;
      },
      10_000,
      '/readyz to answer 503',
    );
    expect(await notReady.json()).toMatchObject({ ready: false });
    health = new HealthClient(`127.0.0.1:${ready.grpcPort}`, grpc.credentials.createInsecure());
    const serving = await new Promise<string>((resolve, reject) =>
      health!.Check({ service: 'tokenrouter.edge.v1.EdgeGenerator' }, { deadline: Date.now() + 5_000 }, (e, r) => (e ? reject(e) : resolve(r!.status))),
    );
    expect(serving).toBe('NOT_SERVING');
    edge.kill('SIGTERM'); // a repeated signal (Ctrl-C reaches a whole process group) must not cut the shutdown short

    // The running streams ended with an explicit final event, not a cut connection.
    expect(await http.ended).toBe(true);
    const last = http.events.at(-1)!;
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data)).toEqual({ type: 'error', code: 'UNAVAILABLE', message: 'the edge is shutting down' });
    expect(http.events.some((e) => e.event === 'done')).toBe(false);
    const status = await grpcStatus;
    expect(status.code).toBe(grpc.status.UNAVAILABLE);
    expect(status.details).toBe('the edge is shutting down');
    expect(grpcEvents.at(-1)!.error).toEqual({ code: 'UNAVAILABLE', message: 'the edge is shutting down' });

    // New work is refused while the edge drains.
    const refused = await fetch(`${base}/api/generate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ error: { code: 'UNAVAILABLE', message: 'the edge is shutting down' } });

    // The late page stream gets the shutdown as its final status, then the edge finishes stopping.
    const late = readSse(await fetch(`${base}/runs/${runId}/events`));
    expect(await late.ended).toBe(true);
    expect(late.events.map((e) => e.event)).toEqual(['end']);
    expect(late.events[0]!.data).toContain('data-finish="error"');
    expect(late.events[0]!.data).toContain('the edge is shutting down');

    expect(await exitWithin(edge, 20_000)).toBe(0);
    const logs = jsonLines(stderr);
    const messages = logs.map((l) => l.msg);
    expect(messages).toContain('already shutting down; another signal forces the exit');
    expect(logs.find((l) => l.msg === 'edge stopped')).toMatchObject({ drained: true, abandoned: 0 });
    // The HTTP and gRPC generations; the page run was refused when its stream opened (it starts only then).
    const started = logs.filter((l) => l.msg === 'generation started');
    expect(started).toHaveLength(2);
    // The request named no threshold: it gets the demo router's default_threshold.
    expect(started[0]).toMatchObject({ mode: 'llm_only', threshold: DEMO.routerThreshold, maxNewTokens: 400 });
    const failed = logs.filter((l) => l.msg === 'generation failed');
    expect(failed).toHaveLength(2);
    for (const line of failed) expect(line).toMatchObject({ code: 'UNAVAILABLE', error: 'the edge is shutting down', fallback: 0 });
  } finally {
    client?.close();
    health?.close();
    edge.kill('SIGKILL');
    await edge.exited;
  }
}, 90_000);
