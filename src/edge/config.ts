/**
 * The edge process's settings, parsed once (flags > EDGE_* variables > --config JSON file > defaults),
 * validated, frozen, and passed to every component.
 */
import { AppError } from '../shared/errors.ts';
import { loadSettings, settingsHelp, type SettingSpec } from '../shared/config-loader.ts';
import { DEMO } from '../shared/paths.ts';

const SPECS = {
  host: { type: 'string', default: '0.0.0.0', help: 'address the web page and HTTP API listen on (the LAN)' },
  port: { type: 'integer', default: 8080, help: 'HTTP port of the web page and API (0 = any free port)' },
  grpcPort: { type: 'integer', default: 50061, help: 'port of the edge gRPC Generate service (-1 = off, 0 = any free port)' },
  slm: { type: 'string', default: DEMO.edgePack, help: 'edge model pack folder' },
  router: { type: 'string', default: DEMO.routerPack, help: "router pack folder, or 'builtin' for the top-1 probability scorer" },
  cloud: { type: 'string', default: '127.0.0.1:50051', help: "cloud shim address host:port, or 'none' to run the edge alone" },
  cloudToken: { type: 'string', help: 'bearer token sent to the cloud shim' },
  cloudTlsCa: { type: 'string', help: 'CA certificate (PEM) to verify the shim; turns TLS on' },
  cloudTlsCert: { type: 'string', help: 'client certificate (PEM) for mutual TLS' },
  cloudTlsKey: { type: 'string', help: 'client key (PEM) for mutual TLS' },
  cloudDeadlineMs: { type: 'integer', default: 5000, help: 'deadline of one routed step; past it the edge decides alone' },
  sendHiddenState: { type: 'boolean', default: false, help: 'send the edge model hidden state with routed steps (leaves the device)' },
  accessToken: { type: 'string', help: 'when set, the page and APIs require it (cookie, bearer header or ?token=)' },
  maxConcurrent: { type: 'integer', default: 8, help: 'generations running at once; more are refused' },
  maxNewTokens: { type: 'integer', default: 1024, help: 'largest max_new_tokens a request may ask for' },
  threads: { type: 'integer', default: 0, help: 'onnxruntime threads for the edge model (0 = its default)' },
  logLevel: { type: 'string', default: 'info', help: 'debug, info, warn or error' },
} as const satisfies Record<string, SettingSpec>;

export type EdgeConfig = ReturnType<typeof parseEdgeConfig>;

export const EDGE_ENV_PREFIX = 'EDGE_';

export function parseEdgeConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>) {
  const s = loadSettings(SPECS, argv, env, EDGE_ENV_PREFIX);
  const check = (ok: boolean, message: string) => {
    if (!ok) throw new AppError('INVALID_ARGUMENT', message);
  };
  check(s.port >= 0 && s.port < 65536, `--port must be in [0, 65535], got ${s.port}`);
  check(s.grpcPort >= -1 && s.grpcPort < 65536, `--grpc-port must be in [-1, 65535], got ${s.grpcPort}`);
  check(s.cloudDeadlineMs > 0, `--cloud-deadline-ms must be positive, got ${s.cloudDeadlineMs}`);
  check(s.maxConcurrent >= 1, `--max-concurrent must be at least 1, got ${s.maxConcurrent}`);
  check(s.maxNewTokens >= 1, `--max-new-tokens must be at least 1, got ${s.maxNewTokens}`);
  check(['debug', 'info', 'warn', 'error'].includes(s.logLevel), `--log-level must be debug, info, warn or error, got ${s.logLevel}`);
  check(!s.cloudTlsCert === !s.cloudTlsKey, '--cloud-tls-cert and --cloud-tls-key go together');
  check(s.cloud === 'none' || /^[^\s]+:\d+$/.test(s.cloud), `--cloud must be host:port or 'none', got ${s.cloud}`);
  return Object.freeze({ ...s, router: s.router === 'builtin' ? undefined : s.router, cloud: s.cloud === 'none' ? undefined : s.cloud });
}

export const EDGE_HELP = `usage: bun run edge [flags]\n\n${settingsHelp(SPECS, EDGE_ENV_PREFIX)}\n  --config <file>  EDGE_CONFIG\n      JSON file with any of the settings above (camelCase keys)`;
