/**
 * An nginx of our own for tests and benches: a rendered deploy/ configuration in a fresh temp dir that is
 * also nginx's prefix (pid file, logs and temp files all land there, nothing under /var), on a free
 * loopback port, in the foreground (`daemon off;`) as our child process. Never the system's service.
 * `stop()` ends it (SIGTERM: nginx's fast shutdown) and removes the temp dir.
 *
 * @example
 * const nginx = await NginxProcess.start(GRPC_SHIMS_CONFIG, ['127.0.0.1:50051', '127.0.0.1:50052']);
 * const cloud = new GrpcCloudClient({ address: nginx.address });
 * await nginx.stop();
 */
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { exitOrKill } from '../child-exit.ts';
import { renderNginxConfig } from './nginx-config.ts';

export const NGINX_INSTALL_HINT = 'install nginx-light: scripts/setup.sh does';

export interface NginxStartOptions {
  /** The nginx binary; default `nginx` on PATH, else /usr/sbin/nginx (Debian's, outside a user's PATH). */
  binary?: string;
  /** How long nginx may take to accept connections. Default 10 s. */
  readyTimeoutMs?: number;
  /** A change to the rendered configuration (a bench's variant of the shipped file); none by default. */
  edit?: (config: string) => string;
}

/** How often a start is tried again when another process took the free port first. */
const PORT_ATTEMPTS = 3;

export class NginxProcess {
  private constructor(
    private readonly child: Bun.Subprocess,
    /** The prefix and temp dir, removed by `stop()`. */
    readonly dir: string,
    /** `127.0.0.1:port` nginx listens on. */
    readonly address: string,
  ) {}

  /**
   * Starts nginx with `templatePath` rendered for `upstreams` and a free port; resolves once it accepts
   * connections. Throws FAILED_PRECONDITION when nginx is not installed, UNAVAILABLE (with nginx's own
   * error log) when it does not start.
   */
  static async start(templatePath: string, upstreams: readonly string[], options: NginxStartOptions = {}): Promise<NginxProcess> {
    const binary = options.binary ?? findNginx();
    if (!existsSync(binary)) throw new AppError('FAILED_PRECONDITION', `nginx is not installed at ${binary} (${NGINX_INSTALL_HINT})`);
    const template = await readFile(templatePath, 'utf8');
    let lastError: unknown;
    for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
      const listen = `127.0.0.1:${await freeLoopbackPort()}`;
      const rendered = renderNginxConfig(template, { listen, upstreams });
      const config = options.edit ? options.edit(rendered) : rendered;
      const dir = await mkdtemp(join(tmpdir(), 'edge-router-nginx-'));
      // Run as root, nginx's workers drop to `nobody`: they must reach the temp files under the prefix.
      await chmod(dir, 0o755);
      await writeFile(join(dir, 'nginx.conf'), config);
      const errorLog = join(dir, 'error.log');
      const child = Bun.spawn([binary, '-p', `${dir}/`, '-c', join(dir, 'nginx.conf'), '-e', errorLog], {
        stdin: 'ignore',
        stdout: 'ignore',
        stderr: 'ignore',
      });
      const nginx = new NginxProcess(child, dir, listen);
      try {
        await nginx.waitAccepting(options.readyTimeoutMs ?? 10_000);
        return nginx;
      } catch (e) {
        lastError = e;
        await nginx.stop();
        // Someone else bound the port between our probe and nginx: try another; anything else is final.
        if (!/Address already in use/.test(errorMessage(e))) throw e;
      }
    }
    throw lastError;
  }

  /** nginx's error log so far (startup problems, upstreams it marked failed). */
  async errorLog(): Promise<string> {
    return readFile(join(this.dir, 'error.log'), 'utf8').catch(() => '');
  }

  /** SIGTERM (fast shutdown: open streams are cut), SIGKILL after `graceMs`; then the temp dir goes. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      await exitOrKill(this.child, graceMs);
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  private async waitAccepting(timeoutMs: number): Promise<void> {
    const until = performance.now() + timeoutMs;
    while (!(await accepts(this.address))) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new AppError('UNAVAILABLE', `nginx exited (${this.child.exitCode ?? this.child.signalCode}) at start:\n${await this.errorLog()}`);
      }
      if (performance.now() > until)
        throw new AppError('UNAVAILABLE', `nginx did not accept connections on ${this.address} within ${timeoutMs} ms:\n${await this.errorLog()}`);
      await Bun.sleep(20);
    }
  }
}

/** The nginx binary, or FAILED_PRECONDITION with the install hint. */
export function findNginx(): string {
  const binary = Bun.which('nginx') ?? (existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : undefined);
  if (!binary) throw new AppError('FAILED_PRECONDITION', `nginx is not installed (${NGINX_INSTALL_HINT})`);
  return binary;
}

/** A loopback port nobody listens on: bound once by the OS, then released. */
async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether a TCP connection to `host:port` opens (and is closed again at once). */
function accepts(address: string): Promise<boolean> {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      socket.destroy();
      resolve(false);
    });
  });
}
