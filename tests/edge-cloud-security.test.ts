/**
 * The shim's bearer token and mutual TLS end to end from the edge: a real edge (`startEdge` from its own
 * config flags) routes tokens through a shim that requires both. With the right token and client
 * certificate routed tokens come from the cloud; with a wrong token the edge still answers, on its own
 * tokens marked fallback, and says why.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { makeTestCertificates, type TestCertificates } from './helpers/cloud-certs.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const TOKEN = 'shim-secret-7d1f';
let certs: TestCertificates;
let shim: ShimServer;

beforeAll(async () => {
  certs = makeTestCertificates();
  shim = await startTestShim({ authToken: TOKEN, tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert });
}, 30_000);

afterAll(async () => {
  await shim.shutdown();
  certs.remove();
});

interface WireToken {
  source: string;
  cloud_error?: string;
}

async function withEdge<T>(flags: string[], fn: (edge: RunningEdge) => Promise<T>): Promise<T> {
  const demo = await ensureDemoPacks();
  const config = parseEdgeConfig(
    [
      ...['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--log-level', 'error'],
      ...['--edge-model', demo.edgePack, '--router', demo.routerPack, '--cloud', `localhost:${shim.port}`],
      ...['--cloud-tls-ca', certs.caCert, '--cloud-tls-cert', certs.clientCert, '--cloud-tls-key', certs.clientKey],
      ...flags,
    ],
    {},
  );
  const edge = await startEdge(config);
  try {
    return await fn(edge);
  } finally {
    await edge.stop();
  }
}

/** A joint generation over the edge's JSON SSE API; the token events' sources and cloud errors. */
async function generate(edge: RunningEdge): Promise<WireToken[]> {
  const response = await fetch(`${edge.url}api/generate`, {
    method: 'POST',
    // llm_only: every token asks the cloud, so each case shows what the cloud answered (the demo router keeps most tokens here).
    body: JSON.stringify({ prompt: 'Once upon a time', mode: 'llm_only', max_new_tokens: 12 }),
    headers: { 'content-type': 'application/json' },
  });
  expect(response.status).toBe(200);
  const body = await response.text();
  expect(body).toContain('event: done');
  return body
    .split('\n\n')
    .filter((block) => block.startsWith('event: token'))
    .map((block) => JSON.parse(block.slice(block.indexOf('data:') + 5)) as WireToken);
}

describe('edge → shim with a bearer token and mutual TLS', () => {
  test('the right token and client certificate: routed tokens come from the cloud', async () => {
    await withEdge(['--cloud-token', TOKEN], async (edge) => {
      const tokens = await generate(edge);
      expect(tokens).toHaveLength(12);
      expect(tokens.filter((t) => t.source === 'llm').length).toBeGreaterThan(0);
      expect(tokens.filter((t) => t.source === 'fallback')).toEqual([]);
    });
    expect(shim.store.count).toBe(0);
  });

  test('a wrong token: the edge answers alone, marking the routed tokens fallback with the reason', async () => {
    await withEdge(['--cloud-token', 'not-the-secret'], async (edge) => {
      const tokens = await generate(edge);
      expect(tokens).toHaveLength(12);
      const fallback = tokens.filter((t) => t.source === 'fallback');
      expect(fallback.length).toBeGreaterThan(0);
      expect(tokens.filter((t) => t.source === 'llm')).toEqual([]);
      expect(fallback[0]!.cloud_error).toContain('invalid bearer token');
    });
  });

  test('no token at all is refused the same way', async () => {
    await withEdge([], async (edge) => {
      const tokens = await generate(edge);
      expect(tokens.filter((t) => t.source === 'llm')).toEqual([]);
      expect(tokens.find((t) => t.source === 'fallback')!.cloud_error).toContain('missing bearer token');
    });
  });

  /** What the box says of its cloud: /readyz, the page header's fragment, Prometheus's gauge. */
  async function cloudShown(edge: RunningEdge): Promise<{ readyz: string; header: string; prometheus: string | undefined }> {
    const readyz = ((await (await fetch(`${edge.url}readyz`)).json()) as { cloud: string }).cloud;
    const header = await (await fetch(`${edge.url}fragments/cloud-state`)).text();
    const metrics = await (await fetch(`${edge.url}metrics`)).text();
    const prometheus = metrics.match(/^edge_cloud_state\{state="([^"]+)"\} 1$/m)?.[1];
    return { readyz, header: header.match(/cloud: ([\w-]+)/)![1]!, prometheus };
  }

  async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await Bun.sleep(25);
    }
  }

  test('a wrong token shows as `refused` on /readyz, the page header and Prometheus from start-up, before any routed token (issue 45, item 4)', async () => {
    await withEdge(['--cloud-token', 'not-the-secret'], async (edge) => {
      await until(async () => (await cloudShown(edge)).readyz === 'refused', 5_000);
      expect(await cloudShown(edge)).toEqual({ readyz: 'refused', header: 'refused', prometheus: 'refused' });
      // Routing does not clear it: every routed step is refused too.
      await generate(edge);
      expect(await cloudShown(edge)).toEqual({ readyz: 'refused', header: 'refused', prometheus: 'refused' });
    });
  });

  test('the right token is never shown refused: ready once a routed token came back', async () => {
    await withEdge(['--cloud-token', TOKEN], async (edge) => {
      await Bun.sleep(300);
      expect((await cloudShown(edge)).readyz).not.toBe('refused');
      await generate(edge);
      expect(await cloudShown(edge)).toEqual({ readyz: 'ready', header: 'ready', prometheus: 'ready' });
    });
    expect(shim.store.count).toBe(0);
  });
});
