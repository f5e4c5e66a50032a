/**
 * Starts the edge: loads the edge model, router and tokenizer (load-edge-engine.ts), connects (lazily) to
 * the cloud shim, serves the web page and HTTP API on the LAN and the Generate service over gRPC, and stops gracefully:
 * /readyz and the gRPC health service turn not-ready, new generations are refused, running ones end with
 * a final `error` event (UNAVAILABLE, "the edge is shutting down"), and only then do the servers close.
 * The process around it is `main.ts`.
 *
 * @example
 * const edge = await startEdge(parseEdgeConfig(['--port', '0'], {}));
 * console.log(edge.url);
 * await edge.stop();
 */
import { PrivateDetector } from '../privacy/private-detect.ts';
import { createLogger, type Logger } from '../../shared/process/logger.ts';
import { parseExecutionProviders } from '../../shared/model/execution-providers.ts';
import { listenError } from '../../shared/process/listen-error.ts';
import { PrefixCache } from '../../shared/model/prefix-cache.ts';
import { routeBudgetOf, type EdgeConfig } from '../config.ts';
import { EdgeRuntime } from '../edge-runtime.ts';
import { GrpcCloudClient } from '../cloud/grpc-cloud-client.ts';
import { EdgeGrpcServer } from '../grpc/edge-grpc-server.ts';
import { createEdgeApp } from '../http/app.tsx';
import { guardConnections } from '../http/connection-limits.ts';
import { loadEdgeEngine } from './load-edge-engine.ts';
import { EdgeChat } from '../chat/edge-chat.ts';
import { basename } from 'node:path';
import { tokenizerFingerprint } from '../../shared/text/tokenizer-fingerprint.ts';
import { RoutedTurns } from '../loop/routed-turns.ts';

/** Bodies above this are refused; the prompt limit itself is checked after parsing. */
const MAX_BODY_BYTES = 256 * 1024;
/**
 * How long shutdown waits for started generations to deliver their final event. Aborted ones take one
 * decoding step; the wait is for a page that reserved a run and has yet to open its stream, which then
 * gets the shutdown event instead of a refused connection.
 */
const SHUTDOWN_GRACE_MS = 5_000;

export interface RunningEdge {
  url: string;
  grpcPort: number | undefined;
  /** The graceful shutdown (see the header); calling it again returns the same promise. */
  stop(): Promise<void>;
}

/** Whether the process serves: loading until every server listens, stopping from the first signal. */
type Phase = 'starting' | 'serving' | 'stopping';

export interface EdgeStartOptions {
  log?: Logger;
  /** Aborts start-up (a stop signal while loading): what was loaded is released and the reason thrown. */
  signal?: AbortSignal;
}

export async function startEdge(config: EdgeConfig, options: EdgeStartOptions = {}): Promise<RunningEdge> {
  const log = options.log ?? createLogger('edge', config.logLevel);
  const { signal } = options;
  signal?.throwIfAborted();
  const parts = await loadEdgeEngine({
    edgeModel: config.edgeModel,
    edgeModelFile: config.edgeModelFile,
    threads: config.threads,
    maxBatch: config.maxBatch,
    executionProviders: parseExecutionProviders(config.executionProvider),
    thread: config.modelThread,
    log,
    router: config.router,
    signal,
  });
  const cloud = config.cloud
    ? new GrpcCloudClient({
        address: config.cloud,
        authToken: config.cloudToken,
        tls: config.cloudTlsCa || config.cloudTlsCert ? { caFile: config.cloudTlsCa, certFile: config.cloudTlsCert, keyFile: config.cloudTlsKey } : undefined,
        stepTimeoutMs: config.cloudDeadlineMs,
        backoff: { failureThreshold: config.cloudFailureThreshold },
        routingKeySecret: config.routingKeySecret,
        // What the edge model means by its ids: a shim whose tokenizer says otherwise gets no step.
        edgeTokenizer: tokenizerFingerprint(parts.edgeModel.pack.dir),
      })
    : undefined;
  const promptCache = config.promptCacheMb > 0 ? new PrefixCache(parts.edgeModel, { maxBytes: config.promptCacheMb * 2 ** 20 }) : undefined;
  const runtime = new EdgeRuntime(
    {
      ...parts,
      cloud,
      promptCache,
      sendHiddenState: config.sendHiddenState,
      privateFoldCase: config.privateFoldCase,
      privateDetector: PrivateDetector.create(config.privateDetection.kinds, config.privateDetection.patterns),
      speculation: { byDefault: config.speculate === 'auto' ? 'auto' : config.speculate === 'on' },
      cloudPrefill: { mode: config.cloudPrefill, turns: new RoutedTurns() },
    },
    { maxPromptChars: 16_384, maxNewTokens: config.maxNewTokens, maxRouteSpan: 16, maxConcurrent: config.maxConcurrent, defaultBudget: routeBudgetOf(config) },
    log,
  );
  let phase: Phase = 'starting';
  const modelName = config.servedModelName ?? basename(parts.edgeModel.pack.dir);
  // One chat for every entry point; a --chat-template that cannot be used stops the start here.
  let chat: EdgeChat;
  try {
    chat = EdgeChat.load(parts.tokenizer, { template: config.chatTemplate, specialTokens: config.chatSpecialTokens, modelName });
  } catch (e) {
    await runtime.shutdown();
    promptCache?.clear();
    await parts.release();
    throw e;
  }
  const app = createEdgeApp(runtime, { accessToken: config.accessToken, maxBodyBytes: MAX_BODY_BYTES, ready: () => phase === 'serving', chat, modelName, log });
  let http: ReturnType<typeof Bun.serve> | undefined;
  let grpcServer: EdgeGrpcServer | undefined;
  try {
    // Silent connections are closed after idleTimeout; running streams and progressing uploads are not (connection-limits.ts).
    const fetch = guardConnections(app.fetch, {
      idleTimeoutS: config.idleTimeout,
      maxOpenRequests: config.maxOpenRequests,
      maxBodyBytes: MAX_BODY_BYTES,
      accessToken: config.accessToken,
    });
    try {
      http = Bun.serve({ hostname: config.host, port: config.port, fetch, idleTimeout: config.idleTimeout });
    } catch (e) {
      throw listenError(e, { what: "the edge's web page and HTTP API", host: config.host, port: config.port, flag: '--port', env: 'EDGE_PORT' });
    }
    if (config.grpcPort >= 0) {
      grpcServer = new EdgeGrpcServer(runtime, {
        host: config.host,
        port: config.grpcPort,
        accessToken: config.accessToken,
        maxReceiveBytes: MAX_BODY_BYTES,
        chat,
      });
      await grpcServer.start().catch((e: unknown) => {
        throw listenError(e, {
          what: "the edge's gRPC Generate service",
          host: config.host,
          port: config.grpcPort,
          flag: '--grpc-port',
          env: 'EDGE_GRPC_PORT',
        });
      });
    }
  } catch (e) {
    await http?.stop(true);
    await runtime.shutdown();
    promptCache?.clear();
    await parts.release();
    throw e;
  }
  const server = http;
  phase = 'serving';
  // The shim's health check needs no token, so only a credentials check tells a wrong --cloud-token at start
  // (later, a refused routed step does); then its tokenizer is compared with the edge model's (later, every
  // session's `opened` does it). Not awaited: a shim that is not up yet is the probe's business.
  void cloud
    ?.checkCredentials()
    .then((state) => {
      if (state === 'refused')
        return log.warn("the cloud shim refused this edge's token: routed tokens fall back to the edge model until --cloud-token matches the shim's", {
          cloud: config.cloud,
        });
      return cloud.checkVocabulary().then((checked) => {
        if (checked === 'mismatch')
          log.warn(`the cloud shim serves another tokenizer: ${cloud.stateReason()}; routed tokens fall back to the edge model`, { cloud: config.cloud });
      });
    })
    .catch(() => {});
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${shownHost}:${server.port}/`;
  log.info('edge ready', {
    url,
    grpcPort: grpcServer?.port,
    edgeModel: config.edgeModel,
    edgeModelFile: config.edgeModelFile,
    executionProviders: parts.edgeModel.executionProviders,
    modelThread: parts.edgeModel.thread,
    router: parts.router.info.name,
    cloud: config.cloud ?? 'none',
  });

  let stopping: Promise<void> | undefined;
  const stop = async () => {
    phase = 'stopping';
    grpcServer?.health.shutdown();
    log.info('edge stopping', { active: runtime.activeCount });
    await runtime.shutdown();
    const drained = await waitForIdle(runtime, SHUTDOWN_GRACE_MS);
    await grpcServer?.shutdown();
    // Drained: every stream has written its final event and the close is clean. Otherwise cut what is left.
    await server.stop(!drained);
    promptCache?.clear();
    await parts.release();
    log.info('edge stopped', { drained, abandoned: runtime.activeCount });
  };
  return {
    url,
    grpcPort: grpcServer?.port,
    stop: () => (stopping ??= stop()),
  };
}

/** Resolves true once no generation is running or about to, false when `timeoutMs` passed first. */
async function waitForIdle(runtime: EdgeRuntime, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!runtime.idle) {
    if (Date.now() >= deadline) return false;
    await Bun.sleep(10);
  }
  return true;
}
