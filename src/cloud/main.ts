/**
 * `bun run shim`: the cloud shim's entry point. Parses the config once, starts the gRPC server, and
 * shuts down gracefully on SIGTERM / SIGINT (streams get a final UNAVAILABLE message); a repeated signal
 * does not cut that short, a third one forces the exit (see graceful-signals.ts).
 */
import { AppError, errorMessage } from '../shared/errors.ts';
import { exitGracefullyOnSignals } from '../shared/graceful-signals.ts';
import { routeGrpcLibraryLog } from '../shared/grpc/library-log.ts';
import { describeShimConfig, parseShimConfig, SHIM_USAGE } from './config.ts';
import { createLogger } from '../shared/logger.ts';
import { startShim } from './shim-server.ts';

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(SHIM_USAGE);
  process.exit(0);
}

try {
  const config = parseShimConfig(argv, process.env);
  const log = createLogger('shim', config.logLevel);
  routeGrpcLibraryLog(log);
  log.debug('config', describeShimConfig(config));
  const shim = await startShim(config, { log });
  exitGracefullyOnSignals(() => shim.shutdown(), log);
} catch (e) {
  // Only a mistake in the settings is answered by the options list; a port in use or a missing model
  // says what to do itself.
  const hint = e instanceof AppError && e.code === 'INVALID_ARGUMENT' ? '\n\nrun with --help for the options' : '';
  console.error(`error: ${errorMessage(e)}${hint}`);
  process.exit(1);
}
