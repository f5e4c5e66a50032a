/** `bun run shim` as a real process: flags, startup log, health, and a graceful SIGTERM. */
import { expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import { join } from 'node:path';
import { CloudRouterClient, HealthClient, type RouteResponse__Output } from '../src/shared/grpc/proto.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { cloudPackDir, waitFor } from './helpers/cloud-fixture.ts';

/** Reads stderr until the startup line, returning the port the shim bound. */
async function listeningPort(stderr: ReadableStream<Uint8Array>): Promise<{ port: number; rest: Promise<string> }> {
  const reader = stderr.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (true) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`shim exited before listening:\n${text}`);
    text += decoder.decode(value, { stream: true });
    const line = text.split('\n').find((l) => l.includes('"shim listening"'));
    if (line) {
      const port = Number((JSON.parse(line) as { address: string }).address.split(':').pop());
      const rest = (async () => {
        let more = '';
        for (let r = await reader.read(); !r.done; r = await reader.read()) more += decoder.decode(r.value, { stream: true });
        return more;
      })();
      return { port, rest };
    }
  }
}

test('the entry point serves, reports health, and on SIGTERM ends streams with a final message', async () => {
  const pack = await cloudPackDir();
  const shim = Bun.spawn(['bun', join(PROJECT_ROOT, 'src/cloud/main.ts'), '--port', '0', '--model-pack', pack], {
    env: { ...process.env, SHIM_MAX_SESSIONS: '4', SHIM_LOG_LEVEL: 'info' },
    stderr: 'pipe',
    stdout: 'pipe',
  });
  const health = { client: undefined as InstanceType<typeof HealthClient> | undefined };
  const router = { client: undefined as InstanceType<typeof CloudRouterClient> | undefined };
  try {
    const { port, rest } = await listeningPort(shim.stderr);
    health.client = new HealthClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const status = await new Promise<string>((resolve, reject) =>
      health.client!.Check({ service: 'tokenrouter.cloud.v1.CloudRouter' }, { deadline: Date.now() + 3_000 }, (e, r) => (e ? reject(e) : resolve(r!.status))),
    );
    expect(status).toBe('SERVING');

    router.client = new CloudRouterClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const call = router.client.Route({ deadline: Date.now() + 10_000 });
    const responses: RouteResponse__Output[] = [];
    call.on('data', (m: RouteResponse__Output) => responses.push(m));
    call.on('error', () => {});
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.write({ open: { requestId: 'main', sampling: { temperature: 0 }, contextIds: [1] } });
    call.write({ step: { offset: 1, maxTokens: 2 } });
    await waitFor(() => responses.length === 2, 5_000, 'the first step');
    expect(responses[1]!.step!.ids).toEqual([403, 407]);

    shim.kill('SIGTERM');
    expect((await ended).code).toBe(grpc.status.UNAVAILABLE);
    expect(responses.at(-1)!.end).toMatchObject({ code: grpc.status.UNAVAILABLE, steps: 1, generatedTokens: 2 });
    expect(await shim.exited).toBe(0);
    expect(await rest).toContain('"shim stopped"');
  } finally {
    router.client?.close();
    health.client?.close();
    shim.kill();
  }
});

test('a bad flag exits non-zero with a one-line error', async () => {
  const shim = Bun.spawn(['bun', join(PROJECT_ROOT, 'src/cloud/main.ts'), '--backend', 'sglang'], { stderr: 'pipe', stdout: 'pipe' });
  expect(await shim.exited).toBe(1);
  expect(await new Response(shim.stderr).text()).toContain('error: backend sglang needs --backend-url');
});
