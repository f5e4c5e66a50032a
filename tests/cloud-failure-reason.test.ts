/**
 * The reason a routed token fell back, as the page shows it: each failure is produced for real (a closed
 * port, a name that does not resolve, a shim that never answers, a shim whose model times out, a wrong
 * token, a connection cut mid-step, TLS mistakes) and its message checked word for word.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import type { Backend } from '../src/cloud/backends/backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { plainCloudReason } from '../src/edge/cloud/cloud-failure-reason.ts';
import { GrpcCloudClient, type GrpcCloudClientOptions } from '../src/edge/cloud/grpc-cloud-client.ts';
import { AppError } from '../src/shared/errors.ts';
import { cloudRouterService } from '../src/shared/grpc/proto.ts';
import { startDelayProxy } from '../src/tools/delay-proxy/delay-proxy.ts';
import { makeTestCertificates, type TestCertificates } from './helpers/cloud-certs.ts';
import { cloudPackDir, EdgeContext, startTestShim } from './helpers/cloud-fixture.ts';
import { freePort } from './helpers/shim-process.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

/** The embedded backend, each step held `delayMs` first (or until the shim aborts it). */
function slowBackend(inner: Backend, delayMs: number): Backend {
  const hold = (signal: AbortSignal | undefined) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, delayMs);
      signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
    });
  return {
    info: inner.info,
    openSequence(id) {
      const sequence = inner.openSequence(id);
      return { step: async (request) => (await hold(request.signal), sequence.step(request)), dispose: () => sequence.dispose() };
    },
    close: () => inner.close(),
  };
}

/** The message of the first routed step's failure, with the health probe off (nothing but the step runs). */
async function reason(options: GrpcCloudClientOptions, during?: () => Promise<void>): Promise<{ code: string; message: string }> {
  const client = new GrpcCloudClient({ stepTimeoutMs: 5_000, healthProbe: false, ...options });
  try {
    const step = client.openConversation({ gate: CloudGate.OPEN, requestId: 'reason' }).next(new EdgeContext([1]).step());
    await during?.();
    const error = (await step.then(
      () => new Error('the step succeeded'),
      (e: unknown) => e,
    )) as AppError;
    return { code: error.code, message: error.message };
  } finally {
    await client.close();
  }
}

let slowShim: ShimServer;
beforeAll(async () => {
  // Every step takes the model 1 s; the shim gives it 300 ms.
  const backend = slowBackend(await EmbeddedBackend.load({ modelPack: await cloudPackDir(), maxLiveSequences: 4 }), 1_000);
  slowShim = await startTestShim({ authToken: 'right-token', backendTimeoutMs: 300 }, { backend });
}, 30_000);
afterAll(() => slowShim.shutdown());

describe('real failures in plain words', () => {
  test('nothing listens: "cloud unreachable (connection refused)"', async () => {
    expect(await reason({ address: `127.0.0.1:${await freePort()}` })).toEqual({ code: 'UNAVAILABLE', message: 'cloud unreachable (connection refused)' });
  });

  test('a host name that does not resolve', async () => {
    expect(await reason({ address: 'no-such-shim.invalid:50051' })).toEqual({
      code: 'UNAVAILABLE',
      message: 'cloud unreachable (host name not found: no-such-shim.invalid:50051)',
    });
  });

  test('a shim that takes the step and never answers: the edge’s deadline', async () => {
    const server = new grpc.Server();
    server.addService(cloudRouterService, { Route: () => {} });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    try {
      expect(await reason({ address: `127.0.0.1:${port}`, stepTimeoutMs: 150 })).toEqual({
        code: 'DEADLINE_EXCEEDED',
        message: 'cloud did not answer within 150 ms',
      });
    } finally {
      server.forceShutdown();
    }
  });

  test('the shim’s own deadline on its model reads the same', async () => {
    // The shim's `end` says "the backend did not answer within 300 ms", well before the edge's 5 s.
    expect(await reason({ address: slowShim.address, authToken: 'right-token' })).toEqual({
      code: 'DEADLINE_EXCEEDED',
      message: 'cloud did not answer within 300 ms',
    });
  });

  test('a wrong token: "cloud refused the token", with the shim’s reason', async () => {
    expect(await reason({ address: slowShim.address, authToken: 'wrong-token' })).toEqual({
      code: 'UNAUTHENTICATED',
      message: 'cloud refused the token (invalid bearer token)',
    });
  });

  test('the connection cut while the step is on its way', async () => {
    const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: slowShim.port, delayMs: 0 });
    const cut = async () => {
      await Bun.sleep(100); // the step is at the shim, its model busy for 300 ms more
      await proxy.close();
    };
    expect(await reason({ address: proxy.address, authToken: 'right-token' }, cut)).toEqual({
      code: 'UNAVAILABLE',
      message: 'cloud connection lost during the step',
    });
  });
});

describe('TLS failures, for real', () => {
  let certs: TestCertificates;
  let tlsShim: ShimServer;
  beforeAll(async () => {
    certs = makeTestCertificates();
    tlsShim = await startTestShim({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert });
  }, 30_000);
  afterAll(async () => {
    await tlsShim.shutdown();
    certs.remove();
  });

  test('no client certificate for a shim that requires one', async () => {
    expect(await reason({ address: `localhost:${tlsShim.port}`, tls: { caFile: certs.caCert } })).toEqual({
      code: 'UNAVAILABLE',
      message: 'cloud unreachable (TLS handshake failed: TLSV1_ALERT_CERTIFICATE_REQUIRED, the shim requires a client certificate)',
    });
  });

  test('plaintext to a TLS shim', async () => {
    expect(await reason({ address: `localhost:${tlsShim.port}` })).toEqual({ code: 'UNAVAILABLE', message: 'cloud unreachable (connection failed)' });
  });
});

describe('the mapping itself', () => {
  test('grpc-js’s other socket errors', () => {
    const raw = (last: string) => new AppError('UNAVAILABLE', `No connection established. Last error: Error: ${last}. Resolution note: `);
    expect(plainCloudReason(raw('error:0A000086:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED (2026-11-23T10:04:03.280Z)'))).toBe(
      'cloud unreachable (TLS handshake failed: CERTIFICATE_VERIFY_FAILED)',
    );
    expect(plainCloudReason(raw('connect ETIMEDOUT 10.0.0.5:50051'))).toBe('cloud unreachable (connection timed out)');
    expect(plainCloudReason(raw('connect EHOSTUNREACH 10.0.0.5:50051'))).toBe('cloud unreachable (no route to the host)');
    expect(plainCloudReason(raw('read ECONNRESET'))).toBe('cloud unreachable (connection reset)');
    expect(plainCloudReason(raw('something new'))).toBe('cloud unreachable (something new)');
  });

  test('messages that are plain already pass unchanged', () => {
    for (const message of ['the shim is shutting down', 'cloud unavailable after 3 failed attempt(s); circuit open, next attempt in 250 ms']) {
      expect(plainCloudReason(new AppError('UNAVAILABLE', message))).toBe(message);
    }
  });
});
