/**
 * The flags every tool takes for its cloud, read here and nowhere else: `--cloud-model PACK` (and
 * `--cloud-model-file F`) runs the cloud pack in this process; `--cloud HOST:PORT` uses a running shim, with
 * `--cloud-token` (or EDGE_CLOUD_TOKEN, as the edge reads it), `--cloud-tls-ca`, and for mutual TLS
 * `--cloud-tls-cert` with `--cloud-tls-key`. One or the other, never both.
 *
 * @example
 * const { values } = parseFlags(args, { ...CLOUD_FLAGS, text: { type: 'string' } });
 * const source = cloudSourceFlags(values, process.env, 'models/stories260k'); // { pack: ... } or { shim: ... }
 */
import type { CloudSource } from './lab/tool-cloud.ts';
import { UsageError } from './cli-support.ts';

export const CLOUD_FLAGS = {
  'cloud-model': { type: 'string' },
  'cloud-model-file': { type: 'string' },
  cloud: { type: 'string' },
  'cloud-token': { type: 'string' },
  'cloud-tls-ca': { type: 'string' },
  'cloud-tls-cert': { type: 'string' },
  'cloud-tls-key': { type: 'string' },
} as const;

export const CLOUD_FLAGS_USAGE = `--cloud-model PACK [--cloud-model-file F] | --cloud HOST:PORT [--cloud-token T] [--cloud-tls-ca PEM] [--cloud-tls-cert PEM --cloud-tls-key PEM]`;

/** The flags that say how to reach a running shim: they go with --cloud. */
const SHIM_FLAGS = ['cloud-token', 'cloud-tls-ca', 'cloud-tls-cert', 'cloud-tls-key'] as const;

/** `fallbackPack`: the pack used when neither is given (undefined: one of them is required). */
export function cloudSourceFlags(values: Record<string, unknown>, env: Readonly<Record<string, string | undefined>>, fallbackPack?: string): CloudSource {
  const pack = values['cloud-model'] as string | undefined;
  const address = values.cloud as string | undefined;
  if (pack !== undefined && address !== undefined)
    throw new UsageError('give the cloud either as --cloud-model PACK (in this process) or as --cloud HOST:PORT (a running shim), not both');
  if (address === undefined) {
    for (const flag of SHIM_FLAGS) if (values[flag] !== undefined) throw new UsageError(`--${flag} goes with --cloud HOST:PORT`);
    const dir = pack ?? fallbackPack;
    if (dir === undefined) throw new UsageError('the cloud is required: --cloud-model PACK or --cloud HOST:PORT');
    return { pack: dir, file: values['cloud-model-file'] as string | undefined };
  }
  if (values['cloud-model-file'] !== undefined) throw new UsageError('--cloud-model-file goes with --cloud-model');
  const port = Number(/:(\d+)$/.exec(address)?.[1]);
  if (!/^\S+:\d+$/.test(address) || port < 1 || port > 65535) throw new UsageError(`--cloud must be host:port, got ${address}`);
  const [tlsCert, tlsKey] = [values['cloud-tls-cert'], values['cloud-tls-key']] as (string | undefined)[];
  if ((tlsCert === undefined) !== (tlsKey === undefined)) throw new UsageError('mutual TLS needs both --cloud-tls-cert and --cloud-tls-key');
  const authToken = (values['cloud-token'] as string | undefined) ?? env.EDGE_CLOUD_TOKEN;
  const tlsCa = values['cloud-tls-ca'] as string | undefined;
  return { shim: { address, ...(authToken ? { authToken } : {}), ...(tlsCa ? { tlsCa } : {}), ...(tlsCert && tlsKey ? { tlsCert, tlsKey } : {}) } };
}
