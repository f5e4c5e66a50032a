/**
 * TLS and mutual TLS for the project's gRPC servers and clients, from PEM files.
 *
 * @example
 * serverCredentials({ certFile: 'server.pem', keyFile: 'server.key', clientCaFile: 'ca.pem' }); // mutual TLS
 * channelCredentials({ caFile: 'ca.pem', certFile: 'client.pem', keyFile: 'client.key' });
 */
import { readFileSync } from 'node:fs';
import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import { AppError, errorMessage } from './errors.ts';

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

export function channelCredentials(tls: ClientTlsFiles | undefined): ChannelCredentials {
  if (!tls) return credentials.createInsecure();
  if (Boolean(tls.certFile) !== Boolean(tls.keyFile)) {
    throw new AppError('INVALID_ARGUMENT', 'mutual TLS needs both a client certificate and its key');
  }
  return credentials.createSsl(
    tls.caFile ? readPem(tls.caFile, 'CA certificate') : null,
    tls.keyFile ? readPem(tls.keyFile, 'TLS key') : null,
    tls.certFile ? readPem(tls.certFile, 'TLS certificate') : null,
  );
}
