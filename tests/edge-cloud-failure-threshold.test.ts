/**
 * `--cloud-failure-threshold` reaches the cloud client: a real edge (`startEdge` from its own flags) points
 * at a port where nothing listens and routes every token. The first N routed tokens each try the cloud and
 * fail; from then on the circuit refuses at once without trying. N follows the flag, not the default.
 * (The whole generation takes milliseconds, well inside the breaker's first 250 ms, so the health probe,
 * which would count failures of its own, has not run yet.)
 */
import { expect, test } from 'bun:test';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge } from '../src/edge/server/edge-server.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { freePort } from './helpers/shim-process.ts';

const REFUSED = /circuit open|reconnection attempt is in progress/;

/** The fallback reasons of an 8-token generation where every token is routed to an unreachable cloud. */
async function fallbackReasons(threshold: number): Promise<string[]> {
  const demo = await ensureDemoPacks();
  const flags = [
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--grpc-port',
    'off',
    '--log-level',
    'error',
    '--edge-model',
    demo.edgePack,
    '--router',
    demo.routerPack,
  ];
  const edge = await startEdge(parseEdgeConfig([...flags, '--cloud', `127.0.0.1:${await freePort()}`, '--cloud-failure-threshold', String(threshold)], {}));
  try {
    const response = await fetch(`${edge.url}api/generate`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Once upon a time', mode: 'joint', threshold: 1, max_new_tokens: 8 }),
      headers: { 'content-type': 'application/json' },
    });
    const body = await response.text();
    expect(body).toContain('event: done');
    const tokens = body
      .split('\n\n')
      .filter((block) => block.startsWith('event: token'))
      .map((block) => JSON.parse(block.slice(block.indexOf('data:') + 5)) as { source: string; cloud_error?: string });
    expect(tokens).toHaveLength(8);
    expect(tokens.every((t) => t.source === 'fallback')).toBe(true);
    return tokens.map((t) => t.cloud_error!);
  } finally {
    await edge.stop();
  }
}

test('a threshold of 1 opens the circuit after the first failed attempt, a threshold of 5 after the fifth', async () => {
  const one = await fallbackReasons(1);
  expect(one.map((reason) => REFUSED.test(reason))).toEqual([false, ...Array<boolean>(7).fill(true)]);
  expect(one[1]).toMatch(/^cloud unavailable after 1 failed attempt\(s\); circuit open/);

  const five = await fallbackReasons(5);
  expect(five.map((reason) => REFUSED.test(reason))).toEqual([...Array<boolean>(5).fill(false), ...Array<boolean>(3).fill(true)]);
  expect(five[5]).toMatch(/^cloud unavailable after 5 failed attempt\(s\); circuit open/);
}, 60_000);
