/**
 * `bun run shim`: the cloud shim's entry point. Parses the config once, starts the gRPC server, and
 * shuts down gracefully on SIGTERM / SIGINT (streams get a final UNAVAILABLE message); a repeated signal
 * does not cut that short, a third one forces the exit (see graceful-signals.ts).
 */
import { errorMessage } from '../shared/errors.ts';
import { exitGracefullyOnSignals } from '../shared/graceful-signals.ts';
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
  log.debug('config', describeShimConfig(config));
  const shim = await startShim(config, { log });
  exitGracefullyOnSignals(() => shim.shutdown(), log);
} catch (e) {
  console.error(`error: ${errorMessage(e)}\n\nrun with --help for the options`);
  process.exit(1);
}
