/** `bench decode --profile`: the profile read back per decode step, on made-up events and on a real run. */
import { describe, expect, test } from 'bun:test';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { PROJECT_ROOT, TRUNCATED_DEMO } from '../src/shared/paths.ts';
import { type ProfileEvent, summarizeDecodeProfile } from '../src/tools/bench/decode-profile-summary.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const run = (ts: number, dur: number): ProfileEvent => ({ cat: 'Session', name: 'model_run', ts, dur });
const kernel = (ts: number, dur: number, op: string, extra: ProfileEvent['args'] = {}): ProfileEvent => ({
  cat: 'Node',
  name: `/${op}_${ts}_kernel_time`,
  ts,
  dur,
  args: { op_name: op, ...extra },
});

describe('summarizeDecodeProfile', () => {
  test('averages the decode runs only, splits matrix products from the rest and counts the past → present copies', () => {
    const pastConcat = (ts: number, past: number) =>
      kernel(ts, 5, 'Concat', { output_size: String((past + 1) * 32), input_type_shape: [{ float: [1, 2, past, 4] }, { float: [1, 2, 1, 4] }] });
    const events: ProfileEvent[] = [
      run(0, 1000), // the prefill: skipped
      kernel(10, 900, 'MatMul'),
      run(2000, 100),
      kernel(2001, 40, 'MatMul'),
      kernel(2050, 10, 'Mul'),
      pastConcat(2060, 7),
      // A Concat of the new position's halves (rotary) is not a cache copy.
      kernel(2070, 5, 'Concat', { output_size: '999', input_type_shape: [{ float: [1, 2, 1, 2] }, { float: [1, 2, 1, 2] }] }),
      run(3000, 200),
      kernel(3001, 100, 'MatMulNBits'),
      kernel(3110, 30, 'Mul'),
      pastConcat(3150, 8),
      { cat: 'Node', name: '/Mul_fence_before', ts: 3160, dur: 1 },
    ];
    const s = summarizeDecodeProfile(events, [7, 8]);
    expect(s.steps).toBe(2);
    expect(s.perStep).toEqual({ nodes: 3.5, runUs: 150, kernelUs: 97.5, matrixUs: 70, kvCopyBytes: (8 * 32 + 9 * 32) / 2 });
    expect(s.nonMatrixShare).toBeCloseTo(27.5 / 150, 12);
    expect(s.betweenKernelsShare).toBeCloseTo(52.5 / 150, 12);
    expect(s.byOpType).toEqual([
      { op: 'MatMulNBits', nodes: 0.5, us: 50 },
      { op: 'MatMul', nodes: 0.5, us: 20 },
      { op: 'Mul', nodes: 1, us: 20 },
      { op: 'Concat', nodes: 1.5, us: 7.5 },
    ]);
  });

  test('a profile with fewer runs than asked for is refused', () => {
    expect(() => summarizeDecodeProfile([run(0, 1)], [5, 6])).toThrow('holds 1 runs');
  });
});

describe('bun run bench decode --profile', () => {
  test('on the 3-layer demo pack: the nodes of each step and the whole KV cache copied once per step', async () => {
    await ensureDemoPacks();
    const proc = Bun.spawn(
      [
        'bun',
        'src/tools/bench/cli.ts',
        'decode',
        '--pack',
        TRUNCATED_DEMO.edgePack,
        '--profile',
        '--prompt-tokens',
        '20',
        '--steps',
        '4',
        '--threads',
        '1',
        '--json',
      ],
      { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' },
    );
    const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    const pack = loadModelPack(TRUNCATED_DEMO.edgePack);
    // Steps 1..4 after the prompt and one untimed step write present caches of 22..25 positions: K and V, float32.
    const perPosition = 2 * pack.numLayers * pack.numKvHeads * pack.headDim * 4;
    expect(json.kv_copy_bytes).toBe((perPosition * (22 + 23 + 24 + 25)) / 4);
    // onnxruntime-node copies every output out: the present caches again, the logits and the hidden states.
    expect(json.output_bytes).toBe(json.kv_copy_bytes + (pack.vocabSize + pack.hiddenSize) * 4);
    expect(json.steps).toBe(4);
    expect(Number.isInteger(json.nodes_per_step)).toBe(true);
    expect(json.nodes_per_step).toBe(json.by_op_type.reduce((n: number, o: { nodes: number }) => n + o.nodes, 0));
    expect(json.matrix_us).toBeLessThanOrEqual(json.kernel_us);
    expect(json.non_matrix_share).toBeGreaterThan(0);
    expect(json.non_matrix_share).toBeLessThan(1);
    expect(stdout).toContain('KV cache copied past → present');
  });
});

describe('bench decode --layout', () => {
  test.each([
    [['--profile', '--pack', 'models/x', '--layout', 'fused'], '--layout builds a --preset; a --pack has its own layout'],
    [['--layout', 'wide'], '--layout must be plain, fused, fused-matmul, got wide'],
    [['--profile', '--peer', 'llama.cpp'], '--profile does not run llama.cpp'],
  ])('%p is refused with a usage message', async (args, message) => {
    const proc = Bun.spawn(['bun', 'src/tools/bench/cli.ts', 'decode', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  });
});
