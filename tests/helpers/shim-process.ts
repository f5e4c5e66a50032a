/**
 * The cloud shim as a real process (`bun src/cloud/main.ts`) on a chosen loopback port, for tests that
 * kill it (SIGKILL: no final messages) and start it again on the same port.
 */
import * as grpc from '@grpc/grpc-js';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { HealthClient } from '../../src/shared/grpc/proto.ts';
import { PROJECT_ROOT } from '../../src/shared/paths.ts';

/** A loopback port nobody listens on (bound once by the OS, then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `bun src/cloud/main.ts` as a child process, ready once its health service says SERVING. */
export class ShimProcess {
  private stderr = '';

  private constructor(readonly child: Bun.Subprocess<'ignore', 'ignore', 'pipe'>) {
    // Drained as it comes, so a chatty shim never blocks on a full pipe; shown when it fails to start.
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of child.stderr) this.stderr += decoder.decode(chunk, { stream: true });
    })();
  }

  /** `logLevel` debug logs every step (see logRecords); default error. */
  static async start(port: number, modelPack: string, options: { logLevel?: 'error' | 'debug' } = {}): Promise<ShimProcess> {
    const logLevel = options.logLevel ?? 'error';
    const child = Bun.spawn(
      ['bun', join(PROJECT_ROOT, 'src/cloud/main.ts'), '--host', '127.0.0.1', '--port', String(port), '--model-pack', modelPack, '--log-level', logLevel],
      { stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' },
    );
    const shim = new ShimProcess(child);
    try {
      await shim.waitServing(port);
    } catch (e) {
      await shim.kill();
      throw e;
    }
    return shim;
  }

  /** The complete JSON log lines the shim has written to stderr so far. */
  logRecords(): Record<string, unknown>[] {
    const lines = this.stderr.split('\n').slice(0, -1);
    return lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  /** Polls the gRPC health service (a fresh channel each time, so no channel backoff slows the poll). */
  private async waitServing(port: number): Promise<void> {
    const until = performance.now() + 60_000;
    while (true) {
      if (this.child.exitCode !== null) throw new Error(`the shim exited with ${this.child.exitCode}:\n${this.stderr}`);
      if (performance.now() > until) throw new Error(`the shim did not serve within 60 s:\n${this.stderr}`);
      const health = new HealthClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      const status = await new Promise<string | undefined>((resolve) =>
        health.Check({ service: '' }, { deadline: Date.now() + 1_000 }, (e, reply) => resolve(e ? undefined : reply?.status)),
      );
      health.close();
      if (status === 'SERVING') return;
      await Bun.sleep(50);
    }
  }

  /** SIGKILL: no final messages, no graceful shutdown; resolves once the process is gone. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.child.exited;
  }
}
