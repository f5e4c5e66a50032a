/** TLS and mutual TLS between the edge's gRPC client and the shim, with certificates made by openssl. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { GrpcCloudClient, type GrpcCloudClientOptions } from '../src/edge/cloud/grpc-cloud-client.ts';
import { makeTestCertificates, type TestCertificates } from './helpers/cloud-certs.ts';
import { EdgeContext, rejectionCode, startTestShim } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

let certs: TestCertificates;

beforeAll(() => {
  certs = makeTestCertificates();
});
afterAll(() => certs.remove());

async function firstToken(shim: ShimServer, options: Partial<GrpcCloudClientOptions>): Promise<number[]> {
  const client = new GrpcCloudClient({ address: `localhost:${shim.port}`, stepTimeoutMs: 3_000, backoff: { initialMs: 1 }, ...options });
  try {
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'tls' });
    const reply = await conversation.next(new EdgeContext([1]).step());
    await conversation.close();
    return reply.tokens;
  } finally {
    await client.close();
  }
}

describe('TLS', () => {
  let shim: ShimServer;
  beforeAll(async () => {
    shim = await startTestShim({ tlsCert: certs.serverCert, tlsKey: certs.serverKey });
  }, 30_000);
  afterAll(() => shim.shutdown());

  test('a client that trusts the CA gets its tokens', async () => {
    expect(await firstToken(shim, { tls: { caFile: certs.caCert } })).toEqual([403]);
  });

  test('the certificate also holds for 127.0.0.1 (IP SAN)', async () => {
    const client = new GrpcCloudClient({ address: `127.0.0.1:${shim.port}`, tls: { caFile: certs.caCert } });
    try {
      expect((await client.openConversation({ gate: CloudGate.OPEN, requestId: 'ip' }).next(new EdgeContext([1]).step())).tokens).toEqual([403]);
    } finally {
      await client.close();
    }
  });

  test('a certificate without the IP is refused when dialing the IP, accepted under its name', async () => {
    const named = await startTestShim({ tlsCert: certs.namedOnlyCert, tlsKey: certs.namedOnlyKey });
    try {
      const viaIp = { address: `127.0.0.1:${named.port}`, tls: { caFile: certs.caCert } };
      expect(await rejectionCode(firstToken(named, viaIp))).toBe('UNAVAILABLE');
      expect(await firstToken(named, { ...viaIp, tlsServerName: 'localhost' })).toEqual([403]);
    } finally {
      await named.shutdown();
    }
  });

  test('through a proxy the certificate is checked against the real server, a name or an IP address', async () => {
    // Dialing the shim as localhost stands in for dialing a proxy in front of it: the identity to check is
    // the one named by tlsServerName, whatever the dialed host is.
    const named = await startTestShim({ tlsCert: certs.namedOnlyCert, tlsKey: certs.namedOnlyKey });
    try {
      const viaName = { address: `localhost:${named.port}`, tls: { caFile: certs.caCert } };
      expect(await firstToken(named, { ...viaName, tlsServerName: 'localhost' })).toEqual([403]);
      expect(await rejectionCode(firstToken(named, { ...viaName, tlsServerName: '127.0.0.1' }))).toBe('UNAVAILABLE');
      expect(await rejectionCode(firstToken(named, { ...viaName, tlsServerName: 'elsewhere.example' }))).toBe('UNAVAILABLE');
    } finally {
      await named.shutdown();
    }
    expect(await firstToken(shim, { address: `localhost:${shim.port}`, tls: { caFile: certs.caCert }, tlsServerName: '127.0.0.1' })).toEqual([403]);
  });

  test('a plaintext client, or one that does not trust the CA, is UNAVAILABLE', async () => {
    expect(await rejectionCode(firstToken(shim, {}))).toBe('UNAVAILABLE');
    expect(await rejectionCode(firstToken(shim, { tls: {} }))).toBe('UNAVAILABLE');
  });
});

describe('mutual TLS', () => {
  let shim: ShimServer;
  beforeAll(async () => {
    shim = await startTestShim({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert });
  }, 30_000);
  afterAll(() => shim.shutdown());

  test('a client certificate from the CA is accepted', async () => {
    expect(await firstToken(shim, { tls: { caFile: certs.caCert, certFile: certs.clientCert, keyFile: certs.clientKey } })).toEqual([403]);
  });

  test('no client certificate, or one from another CA, is refused', async () => {
    expect(await rejectionCode(firstToken(shim, { tls: { caFile: certs.caCert } }))).toBe('UNAVAILABLE');
    expect(await rejectionCode(firstToken(shim, { tls: { caFile: certs.caCert, certFile: certs.strangerCert, keyFile: certs.strangerKey } }))).toBe(
      'UNAVAILABLE',
    );
  });
});
