/**
 * `bun run shim`: the cloud shim's entry point. Parses the config once, starts the gRPC server, and
 * shuts down gracefully on SIGTERM / SIGINT (streams get a final UNAVAILABLE message).
 */
import { errorMessage } from '../shared/errors.ts';
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
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      shim.shutdown().then(
        () => process.exit(0),
        (e) => {
          log.error('shutdown failed', { error: errorMessage(e) });
          process.exit(1);
        },
      );
    });
  }
} catch (e) {
  console.error(`error: ${errorMessage(e)}\n\nrun with --help for the options`);
  process.exit(1);
}
