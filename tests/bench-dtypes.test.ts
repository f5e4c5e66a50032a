import { expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MODELS_DIR } from '../src/shared/paths.ts';
import { ensureDtypePack } from '../src/tools/bench/decode-packs.ts';
import { readModel } from '../src/tools/models/onnx-file.ts';

// Stopped short of the test's own limit, so that a run that hangs shows how far its log got.
function bench(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe', timeout: 90_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

test('bench decode --dtype: one result per weight type, each from its own process, from packs quantized once', () => {
  const r = bench(
    'decode',
    '--preset',
    'tiny-qwen2',
    '--dtype',
    'fp32,q4',
    '--steps',
    '4',
    '--rounds',
    '1',
    '--warmup',
    '1',
    '--prompt-tokens',
    '8',
    '--copy-mib',
    '64',
    '--json',
  );
  expect({ code: r.code, log: r.stderr }).toEqual({ code: 0, log: expect.any(String) });
  const lines = r.stdout.trim().split('\n');
  expect(lines[0]).toStartWith('dtype  ms/token');
  const json = JSON.parse(lines.at(-1)!);
  expect(json.target).toBe('preset:tiny-qwen2');
  expect(json.results.map((x: { dtype: string }) => x.dtype)).toEqual(['fp32', 'q4']);
  const [fp32, q4] = json.results;
  for (const x of json.results) {
    for (const key of ['ms_per_token', 'bound_ms_per_token', 'fraction_of_bound', 'peak_rss_mb', 'prefill_ms', 'ms_per_token_p90'])
      expect(x[key]).toBeGreaterThan(0);
    expect(x.fraction_of_bound).toBeCloseTo(x.bound_ms_per_token / x.ms_per_token, 10);
  }
  // Both bounds divide by the parent's one bandwidth figure.
  expect(q4.bandwidth_gb_s).toBe(fp32.bandwidth_gb_s);
  // 4-bit blocks of 32 with a float32 scale each: 4.5 bits per weight against 32, plus the embedding row.
  expect(q4.weight_bytes / fp32.weight_bytes).toBeLessThan(0.2);
  const q4Pack = join(MODELS_DIR, 'bench', 'tiny-qwen2-q4');
  expect(JSON.parse(readFileSync(join(q4Pack, 'pack-source.json'), 'utf8'))).toEqual({
    tool: 'quantize',
    dtype: 'q4',
    blockSize: 32,
    accuracyLevel: 4,
    from: { tool: 'random', preset: 'tiny-qwen2', seed: 0, graph: 2 },
  });
  // "Once": a second run finds both packs up to date (the recorded source matches what the bench asks for).
  const again = bench(
    'decode',
    '--preset',
    'tiny-qwen2',
    '--dtype',
    'fp32,q4',
    '--steps',
    '2',
    '--rounds',
    '1',
    '--warmup',
    '1',
    '--prompt-tokens',
    '4',
    '--copy-mib',
    '16',
  );
  expect({ code: again.code, log: again.stderr }).toEqual({ code: 0, log: expect.any(String) });
  expect(again.stdout + again.stderr).not.toMatch(/building|quantizing/);
  const ops = readModel(join(q4Pack, 'model.onnx')).graph!.node.map((n) => n.opType);
  // Every projection and the Gemm head of the tied embedding: 7 per layer + 1.
  expect(ops.filter((op) => op === 'MatMulNBits').length).toBe(7 * 2 + 1);
  expect(ops).not.toContain('Gemm');
}, 120_000);

test('the int8 bench pack is MatMulNBits bits=8; one recorded as the earlier int8 form (DynamicQuantizeLinear) is rebuilt, not reused', async () => {
  const lines: string[] = [];
  const dir = await ensureDtypePack('tiny-qwen2', 'int8', (line) => lines.push(line));
  const sourceFile = join(dir, 'pack-source.json');
  const source = JSON.parse(readFileSync(sourceFile, 'utf8'));
  expect(source).toEqual({
    tool: 'quantize',
    dtype: 'int8',
    blockSize: 32,
    accuracyLevel: 4,
    from: { tool: 'random', preset: 'tiny-qwen2', seed: 0, graph: 2 },
  });
  const nbits = readModel(join(dir, 'model.onnx')).graph!.node.filter((n) => n.opType === 'MatMulNBits');
  expect(nbits.length).toBe(7 * 2 + 1);
  expect(nbits.every((n) => Number(n.attribute.find((a) => a.name === 'bits')!.i) === 8)).toBe(true);
  // What a pack made before the switch records.
  writeFileSync(sourceFile, JSON.stringify({ tool: 'quantize', dtype: 'int8', from: source.from }));
  lines.length = 0;
  await ensureDtypePack('tiny-qwen2', 'int8', (line) => lines.push(line));
  expect(lines).toEqual([`quantizing ${join(MODELS_DIR, 'bench', 'tiny-qwen2')} → ${dir} (int8, once)`]);
  expect(JSON.parse(readFileSync(sourceFile, 'utf8'))).toEqual(source);
}, 120_000);

test('bench decode --dtype: unknown types and --pack are refused with a message', () => {
  const unknown = bench('decode', '--preset', 'tiny-qwen2', '--dtype', 'fp32,q3');
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toContain('--dtype: unknown "q3" (known: fp32, q4, int8)');
  const withPack = bench('decode', '--pack', 'x', '--dtype', 'q4');
  expect(withPack.code).toBe(2);
  expect(withPack.stderr).toContain('--dtype works on a --preset');
});

test('bench int8-kernels: every form of the same weights, fp32 first', () => {
  const r = bench('int8-kernels', '--pairs', '1', '--runs', '2', '--json');
  expect(r.code).toBe(0);
  const json = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
  expect(json.results.map((x: { form: string }) => x.form)).toEqual([
    'fp32 MatMul',
    'DynamicQuantizeLinear + MatMulInteger',
    'MatMulNBits bits=8',
    'MatMulNBits bits=8 accuracy_level=4',
    'MatMulNBits bits=4',
    'MatMulNBits bits=4 accuracy_level=4',
  ]);
  // 896×4864 twice: fp32 bytes, then 8-bit (+ column scales), 4-bit blocks (+ block scales).
  expect(json.results[0].weight_bytes).toBe(2 * 896 * 4864 * 4);
  expect(json.results[1].weight_bytes).toBe(2 * 896 * 4864 + (4864 + 896) * 4 + 2);
  expect(json.results[4].weight_bytes).toBe((2 * (896 * 4864)) / 2 + ((896 / 32) * 4864 + (4864 / 32) * 896) * 4);
}, 120_000);
