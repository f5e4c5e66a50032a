/**
 * Starts the cloud shim: backend, session store, CloudRouter and health services on one gRPC server
 * (TLS / mutual TLS when configured, message size limits), and a graceful `shutdown`.
 *
 * @example
 * const shim = await startShim(shimConfig({ port: 0 }));
 * console.log(shim.port);
 * await shim.shutdown();
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Server } from '@grpc/grpc-js';
import { AppError } from '../shared/errors.ts';
import { HealthService } from '../shared/grpc/health.ts';
import { CLOUD_ROUTER_SERVICE_NAME, healthService } from '../shared/grpc/proto.ts';
import { strictService } from '../shared/grpc/strict-decode.ts';
import { serverCredentials } from '../shared/grpc/tls.ts';
import { listenError } from '../shared/process/listen-error.ts';
import { TextTokenizer } from '../shared/text/tokenizer.ts';
import type { Backend } from './backends/backend.ts';
import { createBackend } from './backends/create-backend.ts';
import { maxInflightStepsFor, type ShimConfig } from './config.ts';
import { ActiveStreams, cloudRouterHandlers } from './grpc-service.ts';
import { FifoSlots } from '../shared/process/fifo-slots.ts';
import { vocabularySha256 } from '../shared/text/vocabulary.ts';
import { tokenizerFingerprint } from '../shared/text/tokenizer-fingerprint.ts';

/**
 * Score calls under way at once, each taking its turns in the step admission's batch lane: a tool keeps a
 * few windows in flight so the link's round trips overlap the model's work; more would only hold caches
 * while they wait for turns.
 */
const SCORE_SLOTS = 2;
import { createLogger, type Logger } from '../shared/process/logger.ts';
import { SessionStore } from './sessions/session-store.ts';
import { StepAdmission } from './admission/step-admission.ts';

export interface ShimServer {
  readonly port: number;
  /** `host:port` to dial. */
  readonly address: string;
  readonly config: Readonly<ShimConfig>;
  readonly store: SessionStore;
  readonly backend: Backend;
  readonly health: HealthService;
  readonly streams: ActiveStreams;
  /** The backend's admission control: its load, and how many steps it refused as overloaded. */
  readonly admission: StepAdmission;
  /** Ends every stream with UNAVAILABLE (after a final message), stops the server, releases the backend. */
  shutdown(graceMs?: number): Promise<void>;
}

export interface ShimDependencies {
  /** A ready backend (tests share one); built from the config otherwise. The shim closes it on shutdown. */
  backend?: Backend;
  log?: Logger;
  /** Aborts start-up (a stop signal while loading): what was loaded is released and the reason thrown. */
  signal?: AbortSignal;
}

export async function startShim(config: Readonly<ShimConfig>, deps: ShimDependencies = {}): Promise<ShimServer> {
  const log = deps.log ?? createLogger('shim', config.logLevel);
  deps.signal?.throwIfAborted();
  const tokenizer = config.modelPack && existsSync(join(config.modelPack, 'tokenizer.json')) ? await TextTokenizer.fromPack(config.modelPack) : undefined;
  const backend = deps.backend ?? (await createBackend(config, tokenizer, log));
  if (deps.signal?.aborted) {
    if (!deps.backend) await backend.close();
    deps.signal.throwIfAborted();
  }
  const store = new SessionStore({ maxSessions: config.maxSessions, maxContextTokens: config.maxContextTokens, idleMs: config.sessionIdleMs });
  const health = new HealthService({ '': 'NOT_SERVING', [CLOUD_ROUTER_SERVICE_NAME]: 'NOT_SERVING' });
  const streams = new ActiveStreams();
  const admission = new StepAdmission(maxInflightStepsFor(config));

  const server = new Server({
    'grpc.max_receive_message_length': config.maxMessageBytes,
    'grpc.max_send_message_length': config.maxMessageBytes,
    // Pings find edges that vanished without closing their streams (the idle expiry is the backstop).
    'grpc.keepalive_time_ms': 60_000,
    'grpc.keepalive_timeout_ms': 20_000,
  });
  // What the pack means by its ids, computed once: Score replies, `opened` and Describe carry it.
  const vocabulary = tokenizer ? { vocabularySha256: vocabularySha256(config.modelPack!), tokenizerFingerprint: tokenizerFingerprint(config.modelPack!) } : {};
  server.addService(
    strictService('cloud_router.proto', CLOUD_ROUTER_SERVICE_NAME),
    cloudRouterHandlers({ config, store, backend, admission, tokenizer, log, ...vocabulary }, streams, new FifoSlots(SCORE_SLOTS)),
  );
  server.addService(healthService, health.handlers);

  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        `${host}:${config.port}`,
        serverCredentials(config.tlsCert ? { certFile: config.tlsCert, keyFile: config.tlsKey!, clientCaFile: config.tlsClientCa } : undefined),
        (e, p) => (e ? reject(e) : resolve(p)),
      ),
    );
  } catch (e) {
    store.shutdown(new AppError('UNAVAILABLE', 'the shim did not start'));
    if (!deps.backend) await backend.close();
    throw listenError(e, { what: "the shim's gRPC service", host: config.host, port: config.port, flag: '--port', env: 'SHIM_PORT' });
  }
  health.set('', 'SERVING');
  health.set(CLOUD_ROUTER_SERVICE_NAME, 'SERVING');
  log.info('shim listening', {
    address: `${host}:${port}`,
    backend: backend.info.name,
    maxInflightSteps: admission.maxInFlight,
    tls: Boolean(config.tlsCert),
    mtls: Boolean(config.tlsClientCa),
  });

  let stopping: Promise<void> | undefined;
  const shutdown = (graceMs = config.shutdownGraceMs): Promise<void> =>
    (stopping ??= (async () => {
      log.info('shim shutting down', { streams: streams.size, sessions: store.count });
      health.shutdown();
      const drained = new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      const reason = new AppError('UNAVAILABLE', 'the shim is shutting down');
      store.shutdown(reason);
      streams.abortAll(reason);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = await Promise.race([drained.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs)))]);
      clearTimeout(timer);
      if (timedOut) server.forceShutdown();
      await backend.close();
      log.info('shim stopped', { forced: timedOut });
    })());

  return {
    port,
    address: `${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${port}`,
    config,
    store,
    backend,
    health,
    streams,
    admission,
    shutdown,
  };
}
