/**
 * TLS and mutual TLS for the project's gRPC servers and clients, from PEM files.
 *
 * @example
 * serverCredentials({ certFile: 'server.pem', keyFile: 'server.key', clientCaFile: 'ca.pem' }); // mutual TLS
 * clientTls('cloud:50061', { caFile: 'ca.pem', certFile: 'client.pem', keyFile: 'client.key' });
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { checkServerIdentity } from 'node:tls';
import { credentials, ServerCredentials, type ChannelCredentials, type ChannelOptions } from '@grpc/grpc-js';
import { AppError, errorMessage } from '../errors.ts';

export interface ServerTlsFiles {
  certFile: string;
  keyFile: string;
  /** When set, clients must present a certificate signed by this CA (mutual TLS). */
  clientCaFile?: string;
}

export interface ClientTlsFiles {
  /** CA that signed the server's certificate; the system roots when absent. */
  caFile?: string;
  /** The client's own certificate and key, for mutual TLS. */
  certFile?: string;
  keyFile?: string;
}

function readPem(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `cannot read ${what} ${path}: ${errorMessage(e)}`);
  }
}

export function serverCredentials(tls: ServerTlsFiles | undefined): ServerCredentials {
  if (!tls) return ServerCredentials.createInsecure();
  const keyPair = { private_key: readPem(tls.keyFile, 'TLS key'), cert_chain: readPem(tls.certFile, 'TLS certificate') };
  const clientCa = tls.clientCaFile ? readPem(tls.clientCaFile, 'client CA') : null;
  return ServerCredentials.createSsl(clientCa, [keyPair], clientCa !== null);
}

/**
 * Channel credentials and options for dialing `address`: plaintext without `tls`. `serverName` is the name
 * (or IP address) the server certificate must carry when it is not the host in `address`, as when the
 * channel goes through a proxy.
 *
 * Bun's `tls.connect` refuses an IP address as TLS server name (Node ignores it), and grpc-js always
 * passes the target host. For an IP identity the SNI name becomes a placeholder and the certificate is
 * checked against the IP itself (its IP subjectAltName), which is what Node does.
 */
export function clientTls(address: string, tls: ClientTlsFiles | undefined, serverName?: string): { credentials: ChannelCredentials; options: ChannelOptions } {
  if (!tls) return { credentials: credentials.createInsecure(), options: {} };
  if (Boolean(tls.certFile) !== Boolean(tls.keyFile)) {
    throw new AppError('INVALID_ARGUMENT', 'mutual TLS needs both a client certificate and its key');
  }
  const identity = serverName ?? targetHost(address);
  const ipIdentity = isIP(identity) !== 0;
  const channelCredentials = credentials.createSsl(
    tls.caFile ? readPem(tls.caFile, 'CA certificate') : null,
    tls.keyFile ? readPem(tls.keyFile, 'TLS key') : null,
    tls.certFile ? readPem(tls.certFile, 'TLS certificate') : null,
    ipIdentity ? { checkServerIdentity: (_name, cert) => checkServerIdentity(identity, cert) } : {},
  );
  const sni = ipIdentity ? IP_TARGET_SNI : serverName;
  return {
    credentials: channelCredentials,
    options: sni ? { 'grpc.ssl_target_name_override': sni, ...(serverName ? { 'grpc.default_authority': serverName } : {}) } : {},
  };
}

/** SNI placeholder for IP targets (RFC 6066 forbids IP addresses there anyway). */
const IP_TARGET_SNI = 'ip-address.invalid';

/** The host of `host:port`, `[v6]:port` or `dns:///host:port`. */
function targetHost(address: string): string {
  const target = address.replace(/^[a-z]+:(\/\/\/)?/i, '');
  const bracketed = /^\[([^\]]+)\]/.exec(target);
  if (bracketed) return bracketed[1]!;
  return isIP(target) === 6 ? target : target.replace(/:\d+$/, '');
}
