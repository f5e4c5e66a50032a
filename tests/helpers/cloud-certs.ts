/**
 * Certificates for the TLS tests, made with Debian's `openssl` in a temporary folder: a CA, a server
 * certificate for localhost / 127.0.0.1, one for localhost only, a client certificate from the same CA, and a client certificate
 * from an unrelated CA.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificates {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  /** A server certificate for the name localhost only (no IP address). */
  namedOnlyCert: string;
  namedOnlyKey: string;
  clientCert: string;
  clientKey: string;
  strangerCert: string;
  strangerKey: string;
  remove(): void;
}

function openssl(dir: string, args: string[]): void {
  const result = Bun.spawnSync(['openssl', ...args], { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  if (result.exitCode !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${result.stderr.toString()}`);
}

function makeCa(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
  ]);
}

function makeLeaf(dir: string, name: string, ca: string, extensions: string): void {
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(dir, [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    `/CN=${name}`,
  ]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

export function makeTestCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'cloud-certs-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'other-ca');
  makeLeaf(dir, 'server', 'ca', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  makeLeaf(dir, 'named-only', 'ca', 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n');
  makeLeaf(dir, 'client', 'ca', 'extendedKeyUsage=clientAuth\n');
  makeLeaf(dir, 'stranger', 'other-ca', 'extendedKeyUsage=clientAuth\n');
  const at = (file: string) => join(dir, file);
  return {
    dir,
    caCert: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    namedOnlyCert: at('named-only.pem'),
    namedOnlyKey: at('named-only.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
    strangerCert: at('stranger.pem'),
    strangerKey: at('stranger.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
