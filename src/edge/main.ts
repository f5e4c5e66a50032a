/**
 * `bun run edge`: the edge process. Installs its stop handling first, so that a SIGTERM that comes while
 * the models are still loading ends the process cleanly (see graceful-signals.ts); then parses the config
 * once, imports and starts the edge (edge-server.ts), tells a launcher that it serves (ready-notice.ts),
 * and stops gracefully on SIGTERM / SIGINT (under a launcher, at its request: graceful-signals.ts).
 */
import { errorMessage } from '../shared/errors.ts';
import { handleStopSignals } from '../shared/process/graceful-signals.ts';
import { createLogger } from '../shared/process/logger.ts';
import { notifyReady } from '../shared/process/ready-notice.ts';
import { EDGE_USAGE, parseEdgeConfig } from './config.ts';

const stop = handleStopSignals(createLogger('edge', 'info'));

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(EDGE_USAGE);
  process.exit(0);
}

try {
  const config = parseEdgeConfig(process.argv.slice(2), process.env);
  const log = createLogger('edge', config.logLevel);
  stop.useLogger(log);
  log.debug('starting', { edgeModel: config.edgeModel, router: config.router ?? 'builtin', cloud: config.cloud ?? 'none' });
  // onnxruntime, grpc-js and the web app load here, after the handlers: a stop while they load is a clean one.
  const { routeGrpcLibraryLog } = await import('../shared/grpc/library-log.ts');
  routeGrpcLibraryLog(log);
  const { startEdge } = await import('./server/edge-server.ts');
  const edge = await startEdge(config, { log, signal: stop.signal });
  stop.whenStopped(() => edge.stop());
  // A launcher prints the URL itself, once for the whole system.
  if (!notifyReady({ address: edge.url })) console.log(`edge page: ${edge.url}`);
} catch (e) {
  if (stop.requested) process.exit(0);
  console.error(`error: ${errorMessage(e)}`);
  process.exit(1);
}
