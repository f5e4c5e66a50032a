/**
 * `bun run edge`: the edge process. Loads the edge model, router and tokenizer, connects (lazily) to the
 * cloud shim, serves the web page and HTTP API on the LAN and the Generate service over gRPC, and shuts
 * down gracefully on SIGTERM/SIGINT (running streams get their final event first).
 */
import { AppError, errorMessage } from '../shared/errors.ts';
import { createLogger } from '../shared/logger.ts';
import { DecoderModel } from '../shared/decoder-session.ts';
import { loadModelPack } from '../shared/model-pack.ts';
import { TextTokenizer } from '../shared/tokenizer.ts';
import { EDGE_USAGE, parseEdgeConfig, type EdgeConfig } from './config.ts';
import { EdgeRuntime } from './edge-runtime.ts';
import { GrpcCloudClient } from './grpc-cloud-client.ts';
import { EdgeGrpcServer } from './grpc/edge-grpc-server.ts';
import { createEdgeApp } from './http/app.tsx';
import { loadRouter } from './router.ts';

/** Bodies above this are refused; the prompt limit itself is checked after parsing. */
const MAX_BODY_BYTES = 256 * 1024;

export interface RunningEdge {
  url: string;
  grpcPort: number | undefined;
  stop(): Promise<void>;
}

export async function startEdge(config: EdgeConfig): Promise<RunningEdge> {
  const log = createLogger('edge', config.logLevel);
  const slm = await DecoderModel.load(loadModelPack(config.slm), { threads: config.threads || undefined });
  const tokenizer = await TextTokenizer.fromPack(config.slm);
  const router = await loadRouter(config.router);
  if (router.info.hiddenSize !== null && router.info.hiddenSize !== slm.pack.hiddenSize) {
    throw new AppError('INVALID_ARGUMENT', `router ${config.router} expects hidden size ${router.info.hiddenSize}; ${config.slm} has ${slm.pack.hiddenSize}`);
  }
  const cloud = config.cloud
    ? new GrpcCloudClient({
        address: config.cloud,
        authToken: config.cloudToken,
        tls: config.cloudTlsCa || config.cloudTlsCert ? { caFile: config.cloudTlsCa, certFile: config.cloudTlsCert, keyFile: config.cloudTlsKey } : undefined,
        stepTimeoutMs: config.cloudDeadlineMs,
        backoff: { failureThreshold: config.cloudFailureThreshold },
      })
    : undefined;
  const runtime = new EdgeRuntime(
    { slm, router, tokenizer, cloud, sendHiddenState: config.sendHiddenState },
    { maxPromptChars: 16_384, maxNewTokens: config.maxNewTokens, maxRouteSpan: 16, maxConcurrent: config.maxConcurrent },
  );
  const app = createEdgeApp(runtime, { accessToken: config.accessToken, maxBodyBytes: MAX_BODY_BYTES });
  // Streams stay open as long as a generation runs; Bun's default idle timeout would cut long ones.
  const http = Bun.serve({ hostname: config.host, port: config.port, fetch: app.fetch, idleTimeout: 0 });
  let grpcServer: EdgeGrpcServer | undefined;
  if (config.grpcPort >= 0) {
    grpcServer = new EdgeGrpcServer(runtime, { host: config.host, port: config.grpcPort, accessToken: config.accessToken, maxReceiveBytes: MAX_BODY_BYTES });
    await grpcServer.start();
  }
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${shownHost}:${http.port}/`;
  log.info('edge ready', { url, grpcPort: grpcServer?.port, slm: config.slm, router: router.info.name, cloud: config.cloud ?? 'none' });
  return {
    url,
    grpcPort: grpcServer?.port,
    async stop() {
      log.info('edge stopping', { active: runtime.activeCount });
      await runtime.shutdown();
      await grpcServer?.shutdown();
      // Let the aborted streams write their final events before the sockets close.
      await http.stop(false);
      await router.release();
      await slm.release();
      log.info('edge stopped');
    },
  };
}

if (import.meta.main) {
  if (process.argv.includes('--help')) {
    console.log(EDGE_USAGE);
    process.exit(0);
  }
  let edge: RunningEdge;
  try {
    edge = await startEdge(parseEdgeConfig(process.argv.slice(2), process.env));
  } catch (e) {
    console.error(`error: ${errorMessage(e)}`);
    process.exit(1);
  }
  console.log(`edge page: ${edge.url}`);
  const shutdown = async () => {
    await edge.stop();
    process.exit(0);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
