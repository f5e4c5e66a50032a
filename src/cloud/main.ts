/**
 * `bun run shim`: the cloud shim's entry point. Installs its stop handling first, so that a SIGTERM that
 * comes while the model is still loading ends the process cleanly (see graceful-signals.ts); then parses
 * the config once, imports and starts the gRPC server, tells a launcher that it serves (ready-notice.ts),
 * and shuts down gracefully on SIGTERM / SIGINT, or at a launcher's request (graceful-signals.ts); streams get
 * a final UNAVAILABLE message.
 */
import { AppError, errorMessage } from '../shared/errors.ts';
import { handleStopSignals } from '../shared/process/graceful-signals.ts';
import { createLogger } from '../shared/process/logger.ts';
import { notifyReady } from '../shared/process/ready-notice.ts';
import { describeShimConfig, parseShimConfig, SHIM_USAGE } from './config.ts';

const stop = handleStopSignals(createLogger('shim', 'info'));

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(SHIM_USAGE);
  process.exit(0);
}

try {
  const config = parseShimConfig(argv, process.env);
  const log = createLogger('shim', config.logLevel);
  stop.useLogger(log);
  log.debug('config', describeShimConfig(config));
  // onnxruntime and grpc-js load here, after the handlers: a stop while they load is a clean one.
  const { routeGrpcLibraryLog } = await import('../shared/grpc/library-log.ts');
  routeGrpcLibraryLog(log);
  const { startShim } = await import('./shim-server.ts');
  const shim = await startShim(config, { log, signal: stop.signal });
  stop.whenStopped(() => shim.shutdown());
  notifyReady({ address: shim.address });
} catch (e) {
  if (stop.requested) process.exit(0);
  // Only a mistake in the settings is answered by the options list; a port in use or a missing model
  // says what to do itself.
  const hint = e instanceof AppError && e.code === 'INVALID_ARGUMENT' ? '\n\nrun with --help for the options' : '';
  console.error(`error: ${errorMessage(e)}${hint}`);
  process.exit(1);
}
