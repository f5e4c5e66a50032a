/** `bench decode`: what it counts as read per token, and a short run on the demo edge pack. */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { copyBuffers, CopyTeam, singleThreadCopyBandwidth } from '../src/tools/bench/decode-bandwidth.ts';
import { kvCacheBytes, weightTraffic } from '../src/tools/bench/decode-weights.ts';
import { PRESETS } from '../src/tools/models/random-model.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const work = mkdtempSync(join(tmpdir(), 'bench-decode-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('bytes read per token', () => {
  test('a tied Gemm head reads the embedding whole; a MatMul head leaves it a lookup of one row', async () => {
    const spec = PRESETS['tiny-qwen2']!;
    const { vocabSize: v, hiddenSize: d, intermediateSize: f, numHeads: h, numKvHeads: kv, headDim: hd, numLayers: layers } = spec;
    const perLayer = d + d * h * hd + 2 * d * kv * hd + h * hd * d + h * hd + 2 * kv * hd + d + 3 * d * f;
    const weights = (layers * perLayer + d + v * d) * 4;
    for (const head of ['gemm', 'matmul'] as const) {
      const out = join(work, head);
      await writeRandomPack({ preset: 'tiny-qwen2', out, seed: 0, head, hiddenStatesOutput: true });
      const traffic = weightTraffic(join(out, 'model.onnx'));
      // Small constants of the graph (rotary frequencies, shapes, epsilon) come on top of the weights.
      const constants = traffic.total - weights - (head === 'matmul' ? v * d * 4 : 0);
      expect(constants).toBeGreaterThan(0);
      expect(constants).toBeLessThan(1024);
      if (head === 'gemm') {
        expect(traffic.lookups).toEqual([]);
        expect(traffic.perToken).toBe(traffic.total);
      } else {
        expect(traffic.lookups).toEqual(['model.embed_tokens.weight']);
        expect(traffic.perToken).toBe(traffic.total - v * d * 4 + d * 4);
      }
    }
  });

  test('the KV cache: K and V of every layer, float32', () => {
    const pack = loadModelPack(join(work, 'gemm'));
    expect(kvCacheBytes(pack, 100)).toBe(2 * 2 * 2 * 100 * 16 * 4);
  });

  test('copy bandwidth is positive on one thread and on two workers, round after round', async () => {
    expect(singleThreadCopyBandwidth(copyBuffers(16 * 2 ** 20), 3)).toBeGreaterThan(0.1);
    const team = await CopyTeam.start(2, 8 * 2 ** 20);
    try {
      expect(team.threads).toBe(2);
      expect(await team.measure(50)).toBeGreaterThan(0.1);
      expect(await team.measure(50)).toBeGreaterThan(0.1);
    } finally {
      team.close();
    }
  });

  test('20,000 start signals in a row: both workers answer every round, then still copy (a worker that reread the flag for its wait hung)', async () => {
    // Zero-length windows make the rounds follow each other as fast as they can, which is when the next round's
    // number could be stored between a worker's check and its wait. A hang fails the test by its time limit;
    // before the fix it hung in 1 run of 4 here.
    const team = await CopyTeam.start(2, 4096);
    try {
      for (let round = 0; round < 20_000; round++) await team.measure(0);
      // And they still copy when given a window.
      expect(await team.measure(50)).toBeGreaterThan(0.1);
    } finally {
      team.close();
    }
  }, 60_000);
});

describe('bun run bench decode', () => {
  test('a short run on the demo edge pack prints its figures and the JSON line', async () => {
    const demo = await ensureDemoPacks();
    const proc = Bun.spawn(
      [
        'bun',
        'src/tools/bench/cli.ts',
        'decode',
        '--pack',
        demo.edgePack,
        '--prompt-tokens',
        '20',
        '--steps',
        '4',
        '--warmup',
        '1',
        '--rounds',
        '2',
        '--copy-mib',
        '32',
        '--json',
      ],
      { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' },
    );
    const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    for (const key of [
      'ms_per_token',
      'bound_ms_per_token',
      'fraction_of_bound',
      'tokens_per_second',
      'prefill_ms',
      'prompt_tokens',
      'bandwidth_gb_s',
      'weight_bytes',
    ]) {
      expect(typeof json[key]).toBe('number');
      expect(json[key]).toBeGreaterThan(0);
    }
    expect(json.fraction_of_bound).toBeCloseTo(json.bound_ms_per_token / json.ms_per_token, 9);
    expect(json.weight_bytes).toBe(weightTraffic(join(demo.edgePack, 'model.onnx')).perToken);
    expect(json.rounds).toHaveLength(2);
  });
});
