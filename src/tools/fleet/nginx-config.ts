/**
 * Renders the shipped nginx configurations in deploy/ for a run of our own: the lines marked `# @listen`
 * and `# @upstream` get the addresses given here, everything else stays as shipped, so the tests and
 * benches exercise exactly the file an operator deploys. The configurations keep every path relative to
 * nginx's prefix (`-p`), so the temp dir a run gets is the prefix it passes (nginx-process.ts does).
 *
 * @example
 * const text = renderNginxConfig(await Bun.file(GRPC_SHIMS_CONFIG).text(), {
 *   listen: '127.0.0.1:50061',
 *   upstreams: ['127.0.0.1:50051', '127.0.0.1:50052'],
 * });
 */
import { join } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { PROJECT_ROOT } from '../../shared/paths.ts';

/** gRPC load balancing over several cloud shims (grpc_pass, HTTP/2 listener). */
export const GRPC_SHIMS_CONFIG = join(PROJECT_ROOT, 'deploy', 'nginx-grpc-shims.conf');
/** Consistent hashing of X-SMG-Routing-Key over several SGLang workers (the gateway's stand-in). */
export const SGLANG_AFFINITY_CONFIG = join(PROJECT_ROOT, 'deploy', 'nginx-sglang-affinity.conf');

export interface NginxAddresses {
  /** `host:port` nginx listens on. */
  listen: string;
  /** `host:port` of each upstream server, in order. */
  upstreams: readonly string[];
}

const LISTEN_MARK = /^(\s*)listen\s+\S+(.*?;)\s*# @listen\s*$/;
const UPSTREAM_MARK = /^(\s*)server\s+\S+(.*?;)\s*# @upstream\s*$/;
const ADDRESS = /^[A-Za-z0-9.\-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/;

/**
 * The configuration `template` with its marked listen line and upstream lines set to `addresses`. The
 * parameters after each marked address (`http2`, `max_fails=…`) are kept; the first marked upstream line
 * is the pattern for all of them. Throws INVALID_ARGUMENT for an address that is not `host:port`, no
 * upstream, or a template without the marks.
 */
export function renderNginxConfig(template: string, addresses: NginxAddresses): string {
  if (addresses.upstreams.length === 0) throw new AppError('INVALID_ARGUMENT', 'nginx needs at least one upstream server');
  for (const address of [addresses.listen, ...addresses.upstreams]) {
    if (!ADDRESS.test(address)) throw new AppError('INVALID_ARGUMENT', `nginx addresses are host:port, got "${address}"`);
  }
  const out: string[] = [];
  let listens = 0;
  let upstreamBlocks = 0;
  let inMarkedUpstreams = false;
  for (const line of template.split('\n')) {
    const listen = LISTEN_MARK.exec(line);
    const upstream = UPSTREAM_MARK.exec(line);
    if (listen) {
      listens++;
      out.push(`${listen[1]}listen ${addresses.listen}${listen[2]}  # @listen`);
    } else if (upstream && !inMarkedUpstreams) {
      // The first marked line of a run stands for all of them: one line per address, its parameters kept.
      upstreamBlocks++;
      for (const address of addresses.upstreams) out.push(`${upstream[1]}server ${address}${upstream[2]}  # @upstream`);
    } else if (!upstream) {
      out.push(line);
    }
    inMarkedUpstreams = upstream !== null;
  }
  if (listens !== 1 || upstreamBlocks !== 1) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `an nginx template needs one "# @listen" line and one run of "# @upstream" lines, found ${listens} and ${upstreamBlocks}`,
    );
  }
  return out.join('\n');
}
