import { beforeAll, describe, expect, test } from 'bun:test';
import { errorMessage } from '../src/shared/errors.ts';
import { DEMO } from '../src/shared/paths.ts';
import { runLatencyBench } from '../src/tools/bench/latency.ts';
import { latencyFloor, splitExtra, type FloorRun } from '../src/tools/bench/latency-floor.ts';
import { DEFAULT_DATASET, type LatencyBenchOptions } from '../src/tools/bench/latency-options.ts';
import type { LatencyBenchResult, LatencyRow } from '../src/tools/bench/latency-report.ts';
import { makeTestCertificates } from './helpers/cloud-certs.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

function bench(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'latency', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

const KEYS: (keyof LatencyRow)[] = [
  'mode',
  'threshold',
  'tokens',
  'routed_count',
  'routed_ratio',
  'cloud_calls',
  'fallback_total',
  'slm_ms',
  'ttft_ms',
  'tbt_ms',
  'tbt_ratio',
  'comm_llm_ms',
  'backend_ms',
  'predicted_comm_llm_ms',
  'residual_per_call_ms',
  'total_ms',
  'speculate',
  'overall_ms',
  'overall_ratio',
  'hit_rate',
  'wasted_steps',
  'conditional_steps',
  'route_wait_ms',
  'wait_p50_ms',
  'wait_p99_ms',
  'wait_max_ms',
  'prefill_ahead',
  'first_wait_ms',
  'decode_step_ms',
  'extra_ms',
  'prefill_critical_ms',
  'held_ms',
  'tail_ms',
  'redecode_ms',
];

/** What must hold for any run, whatever the machine's speed. */
function checkRows(result: LatencyBenchResult, thresholds: number[], speculate = [true], waits: number[] = [], ahead = [false]) {
  const { rows, rtt_ms: rtt } = result;
  type Row = [string, number | null, boolean, number | null, boolean];
  const settings: Row[] = [
    ['small_only', null, false, null, false],
    ...thresholds.flatMap((t) => speculate.flatMap((on) => ahead.flatMap((a) => [null, ...waits].map((w): Row => ['joint', t, on, w, a])))),
    ['llm_only', null, false, null, false],
  ];
  expect(rows.map((r): Row => [r.mode, r.threshold, r.speculate, r.route_wait_ms, r.prefill_ahead])).toEqual(settings);
  for (const row of rows) {
    expect(row.wait_p50_ms).toBeGreaterThanOrEqual(0);
    expect(row.wait_p99_ms).toBeGreaterThanOrEqual(row.wait_p50_ms);
    expect(row.wait_max_ms).toBeGreaterThanOrEqual(row.wait_p99_ms);
    // A routed step goes through the proxy: its token waits at least the injected round trip.
    if (row.routed_count > 0 && !row.speculate) expect(row.wait_max_ms).toBeGreaterThanOrEqual(rtt);
    if (row.routed_count === 0) expect(row.wait_max_ms).toBe(0);
  }
  for (const row of rows) {
    expect(row.overall_ms).toBe(row.total_ms);
    if (!row.speculate) expect(row.wasted_steps).toBe(0);
    if (!row.speculate) expect(row.hit_rate).toBeNull();
  }
  for (const row of rows) {
    for (const key of KEYS) expect(row).toHaveProperty(key);
    expect(row.fallback_total).toBe(0);
    expect(row.tokens).toBeGreaterThan(0);
    // Every routed step is one request and its reply through the proxy: at least one injected round trip each,
    // except that a conditional step's trip overlaps the one before it.
    expect(row.comm_llm_ms).toBeGreaterThanOrEqual((row.cloud_calls - row.conditional_steps) * rtt);
    if (!row.speculate) expect(row.conditional_steps).toBe(0);
    expect(row.predicted_comm_llm_ms).toBeCloseTo(row.cloud_calls * rtt + row.backend_ms, 6);
    // One token per routed step (route span 1), plus at most one call per prompt whose reply was the end of text.
    expect(row.cloud_calls).toBeGreaterThanOrEqual(row.routed_count);
    expect(row.cloud_calls).toBeLessThanOrEqual(row.routed_count + 1);
  }
  for (const row of rows) {
    // The floor: the extra time over small_only is split whole into prefill, tail and re-decode.
    expect(row.extra_ms).toBeCloseTo(row.overall_ms - rows[0]!.overall_ms, 6);
    expect(row.prefill_critical_ms + row.tail_ms + row.redecode_ms).toBeCloseTo(row.extra_ms, 6);
    expect(row.prefill_critical_ms).toBeGreaterThanOrEqual(0);
    expect(row.held_ms).toBeGreaterThanOrEqual(0);
    expect(row.redecode_ms).toBeCloseTo(row.wasted_ms, 6);
    expect(row.first_wait_ms === null).toBe(row.routed_count === 0 && row.fallback_total === 0);
    if (row.first_wait_ms !== null && !row.speculate) expect(row.first_wait_ms).toBeGreaterThanOrEqual(rtt);
  }
  const edgeOnly = rows[0]!;
  const cloudOnly = rows.at(-1)!;
  expect(edgeOnly.routed_count).toBe(0);
  expect(edgeOnly.comm_llm_ms).toBe(0);
  expect(edgeOnly.residual_per_call_ms).toBeNull();
  expect(edgeOnly.tbt_ratio).toBe(1);
  expect(cloudOnly.routed_ratio).toBe(1);
  expect(cloudOnly.slm_ms).toBe(0);
  expect(cloudOnly.tbt_ratio).toBeNull();
  // More routing as τ grows: in tokens up to the last joint row (llm_only may stop earlier at the cloud's
  // end of text, with fewer tokens in all), and in share over every row.
  // (Fixed τ only: a wait budget routes less than its τ.)
  const routed = rows
    .slice(0, -1)
    .filter((r) => r.route_wait_ms === null)
    .map((r) => r.routed_count);
  for (let i = 1; i < routed.length; i++) expect(routed[i]!).toBeGreaterThanOrEqual(routed[i - 1]!);
  const ratios = rows.filter((r) => r.route_wait_ms === null).map((r) => r.routed_ratio);
  for (let i = 1; i < ratios.length; i++) expect(ratios[i]!).toBeGreaterThanOrEqual(ratios[i - 1]!);
}

test('bench latency with a 20 ms round trip: a Markdown table, then one JSON line; routing grows with τ and each call pays the round trip', () => {
  const r = bench('--prompts', '2', '--max-new-tokens', '10', '--rtt-ms', '20', '--thresholds', '0.2,0.5,0.8', '--speculate', 'off,on', '--json');
  expect(r.stderr).toContain('prompt 2/2 llm_only');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  const table = lines.slice(0, -1).join('\n');
  expect(table).toContain('| setting | routed | routed % |');
  for (const name of ['small_only', 'joint τ=0.2', 'joint τ=0.5 spec', 'joint τ=0.8', 'llm_only']) expect(table).toContain(`| ${name} |`);
  expect(table).toContain('identical outputs with and without speculation and prefill ahead: true');
  const result = JSON.parse(lines.at(-1)!) as LatencyBenchResult;
  expect(result.rtt_ms).toBe(20);
  expect(result.prompts).toBe(2);
  expect(result.max_new_tokens).toBe(10);
  expect(result.dataset).toBe(DEFAULT_DATASET);
  checkRows(result, [0.2, 0.5, 0.8], [false, true]);
  expect(result.identical_outputs).toBe(true);
  // The same tokens and routing decisions with and without speculation, so the same routed counts.
  for (const t of [0.2, 0.5, 0.8]) {
    const [off, on] = result.rows.filter((row) => row.threshold === t);
    expect(on!.routed_count).toBe(off!.routed_count);
  }
  // Something is routed between the ends, and llm_only routes every token.
  expect(result.rows.at(-2)!.routed_count).toBeGreaterThan(0);
  expect(result.rows.at(-1)!.routed_count).toBe(result.rows.at(-1)!.tokens);
}, 60_000);

test('--route-wait-ms: each τ again under each wait budget, with the per-token wait in the table and the JSON', () => {
  const r = bench('--prompts', '1', '--max-new-tokens', '12', '--rtt-ms', '10', '--thresholds', '0.8', '--route-wait-ms', '300,5', '--json');
  expect(r.code).toBe(0);
  const lines = r.stdout.trim().split('\n');
  const table = lines.slice(0, -1).join('\n');
  expect(table).toContain('| wait p50 / p99 / max (ms) |');
  for (const name of ['joint τ=0.8', 'joint τ=0.8 wait≤5', 'joint τ=0.8 wait≤300']) expect(table).toContain(`| ${name} |`);
  const result = JSON.parse(lines.at(-1)!) as LatencyBenchResult;
  expect(result.route_span).toBe(1);
  checkRows(result, [0.8], [false], [5, 300]);
  // Every routed token would wait at least the 10 ms round trip, over a 5 ms budget: the box measures the
  // round trip before its first decision, and the budget routes nothing.
  const [, , tight] = result.rows;
  expect(tight!.route_wait_ms).toBe(5);
  expect(tight!.routed_count).toBe(0);
  expect(tight!.wait_max_ms).toBe(0);
}, 60_000);

test('--edge-cpus/--shim-cpus: the shim runs as a separate, pinned process and the bench behaves as with the in-process one (here with --cloud-prefill lazy,eager)', () => {
  // CPU 0 for both, so that the test runs on a one-core machine too; the pinning itself is taskset's.
  const r = bench(
    '--prompts',
    '1',
    '--max-new-tokens',
    '6',
    '--rtt-ms',
    '10',
    '--thresholds',
    '0.5',
    '--speculate',
    'off,on',
    '--cloud-prefill',
    'lazy,eager',
    '--edge-cpus',
    '0',
    '--shim-cpus',
    '0',
    '--json',
  );
  expect(r.code).toBe(0);
  expect(r.stderr).toContain('started cloud shim (CPUs 0)');
  expect(r.stderr).toContain('joint τ=0.5 spec ahead');
  const result = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as LatencyBenchResult;
  expect(result.cloud).toBe(`shim process on CPUs 0 (edge on 0), embedded ${DEMO.cloudPack}`);
  // With the prompt sent ahead too: the same tokens in every joint row.
  checkRows(result, [0.5], [false, true], [], [false, true]);
  expect(result.identical_outputs).toBe(true);
}, 60_000);

test('--router uniform routes about τ of the positions on any pack', () => {
  const r = bench('--prompts', '2', '--max-new-tokens', '24', '--rtt-ms', '0', '--thresholds', '0.3', '--router', 'uniform', '--json');
  expect(r.code).toBe(0);
  const result = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as LatencyBenchResult;
  expect(result.router).toBe('uniform-share:1');
  const joint = result.rows.find((row) => row.mode === 'joint')!;
  // 48 positions at share 0.3: 14.4 expected, and a binomial count within ±3σ (σ ≈ 3.2).
  expect(joint.routed_count * 2).toBeGreaterThan(4);
  expect(joint.routed_count * 2).toBeLessThan(25);
}, 60_000);

test('with no injected delay the edge dials the shim directly', async () => {
  const result = await runLatencyBench({
    dataset: DEFAULT_DATASET,
    prompts: 1,
    maxNewTokens: 4,
    rttMs: 0,
    thresholds: [0.5],
    speculate: [true],
    edgeModel: DEMO.edgePack,
    router: DEMO.routerPack,
    cloudModel: DEMO.cloudPack,
    log: () => {},
  });
  expect(result.rtt_ms).toBe(0);
  expect(result.prompts).toBe(1);
  expect(result.identical_outputs).toBeNull(); // only one side ran
  checkRows(result, [0.5]);
}, 60_000);

test('a running shim that wants a token and mutual TLS: dialed through the proxy, its certificate checked against its own name', async () => {
  const certs = makeTestCertificates();
  const token = 'bench-secret-41c9';
  // A certificate for the name localhost only: the proxy's address, 127.0.0.1, would not pass.
  const shim = await startTestShim({ authToken: token, tlsCert: certs.namedOnlyCert, tlsKey: certs.namedOnlyKey, tlsClientCa: certs.caCert });
  const options: LatencyBenchOptions = {
    dataset: DEFAULT_DATASET,
    prompts: 1,
    maxNewTokens: 4,
    rttMs: 10,
    thresholds: [0.5],
    speculate: [true],
    edgeModel: DEMO.edgePack,
    router: DEMO.routerPack,
    cloudModel: DEMO.cloudPack,
    cloud: `localhost:${shim.port}`,
    cloudToken: token,
    cloudTls: { caFile: certs.caCert, certFile: certs.clientCert, keyFile: certs.clientKey },
    log: () => {},
  };
  try {
    const result = await runLatencyBench(options);
    expect(result.cloud).toBe(`localhost:${shim.port}`);
    checkRows(result, [0.5]);
    expect(result.rows.at(-1)!.routed_count).toBe(result.rows.at(-1)!.tokens);
    // The shim's refusal reaches the user with its reason, not as a bare "did not answer".
    // (Caught rather than through expect().rejects, under which Bun 1.4 runs the bench seconds slower.)
    const failure = (changes: Partial<LatencyBenchOptions>) => runLatencyBench({ ...options, ...changes }).then(() => 'no error', errorMessage);
    expect(await failure({ cloudToken: 'wrong' })).toBe(`the cloud at localhost:${shim.port} did not answer: cloud refused the token (invalid bearer token)`);
    expect(await failure({ cloudTls: { caFile: certs.caCert } })).toMatch(/^the cloud at localhost:\d+ did not answer: .*CERTIFICATE_REQUIRED/);
  } finally {
    await shim.shutdown();
    certs.remove();
  }
}, 60_000);

test('bench latency: bad flags are usage errors', () => {
  const cases: [string[], string][] = [
    [['--rtt-ms=-5'], 'error: --rtt-ms must be in [0, 5000], got -5'],
    [['--prompts', 'many'], 'error: --prompts must be an integer, got "many"'],
    [['--thresholds', '0.2,2'], 'error: --thresholds must be comma-separated numbers in [0, 1]'],
    [['--speculate', 'on,maybe'], 'error: --speculate must be off, on or off,on, got "on,maybe"'],
    [['--speculate', 'on,on'], 'error: --speculate must be off, on or off,on, got "on,on"'],
    [['--cloud', 'nowhere'], 'error: --cloud must be host:port, got nowhere'],
    [
      ['--cloud', 'h:1', '--cloud-model', 'x'],
      'error: give the cloud either as --cloud-model PACK (in this process) or as --cloud HOST:PORT (a running shim), not both',
    ],
    [['--cloud-token', 't'], 'error: --cloud-token goes with --cloud HOST:PORT'],
    [['--cloud-model', 'x', '--cloud-model-file', 'y.onnx'], "error: --cloud-model-file: bench latency's shim runs its pack's model.onnx"],
    [['--cloud', 'h:1', '--cloud-tls-cert', 'c.pem'], 'error: mutual TLS needs both --cloud-tls-cert and --cloud-tls-key'],
    [['--edge-cpus', '0'], 'error: --edge-cpus and --shim-cpus go together'],
    [['--edge-cpus', '0', '--shim-cpus', 'one'], 'error: --shim-cpus must be a CPU list such as 1, 0,2 or 2-3, got "one"'],
    [['--edge-cpus', '0', '--shim-cpus', '1', '--cloud', 'h:1'], 'error: --shim-cpus starts a shim here: it excludes --cloud'],
    [['--frobnicate'], 'error: Unknown option'],
    [['--conditional-steps', 'maybe'], 'error: --conditional-steps must be on or off, got "maybe"'],
    [['--route-wait-ms', '300,soon'], 'error: --route-wait-ms must be comma-separated integers in [1, 600000], got "300,soon"'],
    [['--route-wait-ms', '0'], 'error: --route-wait-ms must be comma-separated integers in [1, 600000], got "0"'],
    [['--route-span', '17'], 'error: --route-span must be in [1, 16], got 17'],
    [['--cloud-prefill', 'auto'], 'error: --cloud-prefill must be lazy, eager or lazy,eager, got "auto"'],
  ];
  for (const [args, message] of cases) {
    const r = bench(...args);
    expect(r.code).toBe(2);
    expect(r.stderr).toStartWith(message);
    expect(r.stderr).toContain('usage: bun run bench');
  }
});

describe('the floor', () => {
  test('cloud prefill is the first step beyond a decode step; held, its wait beyond the round trip and the shim', () => {
    // Decode step: the median of the later steps' backend times, 110 ms.
    const runs: FloorRun[] = [
      { firstRoutedWaitMs: 500, stepBackendMs: [200, 100, 120], stepCloudMs: [210, 104, 123], wastedMs: 30 },
      { firstRoutedWaitMs: 300, stepBackendMs: [100, 110], stepCloudMs: [105, 112], wastedMs: 0 },
      { firstRoutedWaitMs: null, stepBackendMs: [], stepCloudMs: [], wastedMs: 0 },
    ];
    const floor = latencyFloor(runs, 170);
    expect(floor.decode_step_ms).toBe(110);
    expect(floor.first_wait_ms).toBe(400);
    expect(floor.prefill_critical_ms).toBeCloseTo((210 - 110 + 0) / 3, 9);
    expect(floor.held_ms).toBeCloseTo((500 - 170 - 210 + (300 - 170 - 105)) / 3, 9);
    expect(floor.redecode_ms).toBe(10);
    const row = { ...floor, overall_ms: 1500 };
    splitExtra(row, 1000);
    expect([row.extra_ms, row.tail_ms]).toEqual([500, 500 - floor.prefill_critical_ms - 10]);
  });
});
