/**
 * `bun run bench affinity`: the access-log reading (exact), the keyless variant of the shipped nginx file,
 * and a short run of both arms through a real nginx to two SGLang fakes.
 */
import { beforeAll, expect, test } from 'bun:test';
import { affinityOf, stepsByKey, withoutKeyHash } from '../src/tools/bench/affinity.ts';
import { SGLANG_AFFINITY_CONFIG } from '../src/tools/fleet/nginx-config.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { lastJsonLine, runBench } from './helpers/run-bench.ts';

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

const LOG = [
  '2026-11-24T08:00:00+00:00 "POST /generate HTTP/1.1" 200 key="g1" upstream=127.0.0.1:5001 request_time=0.003',
  '2026-11-24T08:00:00+00:00 "POST /generate HTTP/1.1" 200 key="g2" upstream=127.0.0.1:5002 request_time=0.003',
  '2026-11-24T08:00:00+00:00 "POST /abort_request HTTP/1.1" 200 key="g1" upstream=127.0.0.1:5002 request_time=0.001',
  '2026-11-24T08:00:01+00:00 "POST /generate HTTP/1.1" 200 key="g1" upstream=127.0.0.1:5001 request_time=0.003',
  '2026-11-24T08:00:01+00:00 "POST /generate HTTP/1.1" 200 key="g2" upstream=127.0.0.1:5002, 127.0.0.1:5001 request_time=0.004',
  '2026-11-24T08:00:01+00:00 "POST /generate HTTP/1.1" 400 key="g2" upstream=127.0.0.1:5002 request_time=0.001',
  '2026-11-24T08:00:02+00:00 "POST /generate HTTP/1.1" 200 key="g2" upstream=127.0.0.1:5002 request_time=0.003',
].join('\n');

test("nginx's access log read per key: the worker that served each step (the last one tried), answered steps only", () => {
  const byKey = stepsByKey(LOG);
  expect([...byKey]).toEqual([
    ['g1', ['127.0.0.1:5001', '127.0.0.1:5001']],
    ['g2', ['127.0.0.1:5002', '127.0.0.1:5001', '127.0.0.1:5002']],
  ]);
  expect(affinityOf(byKey, ['127.0.0.1:5001', '127.0.0.1:5002'])).toEqual({
    steps: 5,
    generations: 2,
    steps_on_first_worker: 0.8,
    generations_on_one_worker: 0.5,
    steps_per_worker: [3, 2],
  });
});

test('the keyless variant removes exactly the hash line of the shipped file, and refuses a file without one', async () => {
  const shipped = await Bun.file(SGLANG_AFFINITY_CONFIG).text();
  const keyless = withoutKeyHash(shipped).split('\n');
  const lines = shipped.split('\n');
  expect(keyless.length).toBe(lines.length);
  const changed = lines.flatMap((line, i) => (line === keyless[i] ? [] : [[line.trim(), keyless[i]!.trim()]]));
  expect(changed).toEqual([['hash $http_x_smg_routing_key consistent;', '']]);
  expect(() => withoutKeyHash(keyless.join('\n'))).toThrow('has no "hash $http_x_smg_routing_key consistent;" line');
});

test("with the key every step stays on its generation's first worker and finds its context cached; without it steps scatter and the workers prefill more", () => {
  const r = runBench(['affinity', '--edges', '6', '--duration', '2', '--token-ms', '5', '--share', '0.3', '--json']);
  expect(r.stderr).not.toContain('error');
  expect(r.code).toBe(0);
  const { rows } = lastJsonLine(r.stdout);
  const [key, noKey] = rows;
  expect([key.arm, noKey.arm]).toEqual(['key', 'no key']);
  for (const row of rows) {
    expect(row.errors).toBe(0);
    expect(row.steps).toBeGreaterThan(50);
    expect(row.steps_per_worker.reduce((a: number, b: number) => a + b, 0)).toBe(row.steps);
  }
  expect(key.steps_on_first_worker).toBe(1);
  expect(key.generations_on_one_worker).toBe(1);
  expect(key.follow_up_cached_share).toBeGreaterThanOrEqual(0.9);
  // Round robin over two workers: about half of a generation's steps land on the other one.
  expect(noKey.steps_on_first_worker).toBeLessThan(0.8);
  expect(noKey.prefilled_tokens_per_step).toBeGreaterThan(key.prefilled_tokens_per_step);
}, 120_000);
