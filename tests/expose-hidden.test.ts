/**
 * `expose-hidden` and `inspect` on tiny random Qwen2 packs: the patched model's `hidden_states` must be
 * what a pack built with that output computes (same seed ⇒ same weights), its logits must not move,
 * and every bad input must fail with one clear line and leave no output behind.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { AppError, type ErrorCode } from '../src/shared/errors.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { ort, type OrtTensor } from '../src/shared/model/ort.ts';
import { exposeHiddenStates } from '../src/tools/models/expose-hidden.ts';
import { formatInspection, inspectModel } from '../src/tools/models/inspect-model.ts';
import { readModel, writeModel } from '../src/tools/models/onnx-file.ts';
import { DataType, GraphBuilder } from '../src/shared/model/onnx-graph.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { maxAbsDiff } from './helpers/max-abs-diff.ts';

const SEED = 11;
const HIDDEN = 64;
const VOCAB = 151936;
const TOKENS = [9707, 11, 1879, 0];
const CLI = resolve(import.meta.dir, '..', 'src/tools/models/cli.ts');

let dir: string;
const model = (pack: string) => join(dir, pack, 'model.onnx');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'expose-hidden-'));
  for (const sub of ['bad', 'external']) mkdirSync(join(dir, sub));
  await writeRandomPack({ preset: 'tiny-qwen2', out: join(dir, 'matmul'), seed: SEED, head: 'matmul', hiddenStatesOutput: false });
  await writeRandomPack({ preset: 'tiny-qwen2', out: join(dir, 'gemm'), seed: SEED, head: 'gemm', hiddenStatesOutput: false });
  await writeRandomPack({ preset: 'tiny-qwen2', out: join(dir, 'reference'), seed: SEED, head: 'matmul', hiddenStatesOutput: true });
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface Outputs {
  logits: Float32Array;
  hidden?: { data: Float32Array; dims: readonly number[] };
}

/** One prefill of TOKENS through the model at `path`, with an empty KV cache. */
async function run(path: string): Promise<Outputs> {
  const session = await ort.InferenceSession.create(path);
  try {
    const n = TOKENS.length;
    const ints = (values: number[]) => new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), [1, n]);
    const feeds: Record<string, OrtTensor> = {
      input_ids: ints(TOKENS),
      attention_mask: ints(TOKENS.map(() => 1)),
      position_ids: ints(TOKENS.map((_, i) => i)),
    };
    for (const name of session.inputNames.filter((i) => i.startsWith('past_key_values.'))) {
      feeds[name] = new ort.Tensor('float32', new Float32Array(0), [1, 2, 0, 16]);
    }
    // Every position's logits (and the LM head's input for all of them).
    if (session.inputNames.includes('num_logits_to_keep')) feeds.num_logits_to_keep = new ort.Tensor('int64', BigInt64Array.of(0n), []);
    const out = await session.run(feeds);
    const hidden = out.hidden_states;
    return {
      logits: out.logits!.data as Float32Array,
      ...(hidden ? { hidden: { data: hidden.data as Float32Array, dims: hidden.dims } } : {}),
    };
  } finally {
    await session.release();
  }
}

/** The patched model computes the reference pack's hidden states and the original's logits. */
async function expectMatchesReference(original: string, patched: string): Promise<void> {
  const [before, after, reference] = await Promise.all([run(original), run(patched), run(model('reference'))]);
  expect(after.hidden?.dims).toEqual([1, TOKENS.length, HIDDEN]);
  // Exact: up to the head both graphs are the same ops on the same weights.
  expect(maxAbsDiff(after.hidden!.data, reference.hidden!.data)).toBe(0);
  expect(maxAbsDiff(after.logits, before.logits)).toBe(0);
}

async function expectAppError(promise: Promise<unknown>, code: ErrorCode, pattern: RegExp): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  const { message } = error as AppError;
  expect((error as AppError).code).toBe(code);
  expect(message).toMatch(pattern);
  expect(message).not.toContain('\n');
  return message;
}

/** Two MatMuls whose sum is `logits`: nothing says which one is the head. */
function writeAmbiguousModel(path: string): void {
  const g = new GraphBuilder('two-heads');
  const x = g.input('x', DataType.FLOAT, ['batch', 'seq', 8]);
  const scaled = g.op('Mul', [x, g.floats('half', [0.5], [])], {}, ['scaled_x']);
  const w = (name: string) =>
    g.floats(
      name,
      Float32Array.from({ length: 80 }, (_, i) => i / 80),
      [8, 10],
    );
  const sum = g.op('Add', [g.op('MatMul', [x, w('w1')]), g.op('MatMul', [scaled, w('w2')])]);
  g.output(sum, 'logits', DataType.FLOAT, ['batch', 'seq', 10]);
  writeModel(g.toModel(), path);
}

function writeNoLogitsModel(path: string): void {
  const g = new GraphBuilder('no-logits');
  const x = g.input('x', DataType.FLOAT, ['batch', 8]);
  g.output(g.op('MatMul', [x, g.floats('w', new Float32Array(80), [8, 10])]), 'scores', DataType.FLOAT, ['batch', 10]);
  writeModel(g.toModel(), path);
}

describe('exposeHiddenStates', () => {
  test('MatMul head: hidden_states equals the reference pack, logits unchanged', async () => {
    const out = join(dir, 'matmul-patched', 'model.onnx');
    const result = await exposeHiddenStates({ input: model('matmul'), output: out });
    expect(result.status).toBe('added');
    expect(result.head).toContain('MatMul');
    expect(result.type).toEqual({ elemType: DataType.FLOAT, dims: ['batch_size', 'sequence_length', HIDDEN] });
    await expectMatchesReference(model('matmul'), out);
  });

  test('an exposed head input cut by num_logits_to_keep: the edge still gets the last hidden state and the one before it', async () => {
    await exposeHiddenStates({ input: model('matmul'), output: join(dir, 'matmul', 'model_hidden.onnx') });
    const [patched, reference] = await Promise.all([
      DecoderModel.load(loadModelPack(join(dir, 'matmul'), 'model_hidden.onnx')),
      DecoderModel.load(loadModelPack(join(dir, 'reference'))),
    ]);
    try {
      const [a, b] = await Promise.all([patched.newSequence().append(TOKENS), reference.newSequence().append(TOKENS)]);
      expect(maxAbsDiff(a.hidden, b.hidden)).toBe(0);
      expect(maxAbsDiff(a.previousHidden, b.previousHidden)).toBe(0);
      expect(maxAbsDiff(a.logits, b.logits)).toBe(0);
    } finally {
      await patched.release();
      await reference.release();
    }
  });

  test('Gemm head: exposes the 3-D tensor before the flattening Reshape', async () => {
    const out = join(dir, 'gemm-patched', 'model.onnx');
    const result = await exposeHiddenStates({ input: model('gemm'), output: out });
    expect(result.head).toContain('Gemm');
    expect(result.type?.dims).toEqual(['batch_size', 'sequence_length', HIDDEN]);
    await expectMatchesReference(model('gemm'), out);
  });

  test('a second run leaves the model unchanged (copied, or nothing written in place)', async () => {
    const once = join(dir, 'twice', 'once.onnx');
    const twice = join(dir, 'twice', 'twice.onnx');
    const first = await exposeHiddenStates({ input: model('matmul'), output: once });
    const second = await exposeHiddenStates({ input: once, output: twice });
    expect(second).toMatchObject({ status: 'unchanged', tensor: first.tensor, written: true });
    expect(readFileSync(twice).equals(readFileSync(once))).toBe(true);

    const mtime = statSync(once).mtimeMs;
    const inPlace = await exposeHiddenStates({ input: once, output: once });
    expect(inPlace).toMatchObject({ status: 'unchanged', written: false });
    expect(statSync(once).mtimeMs).toBe(mtime);
  });

  test('external data: the output refers to the same weights, placed beside it', async () => {
    const external = join(dir, 'external', 'model.onnx');
    writeModel(readModel(model('matmul')), external, { externalData: true });
    const data = join(dir, 'external', 'model.onnx_data');
    const dataBefore = statSync(data);

    const elsewhere = join(dir, 'external-patched', 'model.onnx');
    const moved = await exposeHiddenStates({ input: external, output: elsewhere });
    expect(moved.dataFiles).toEqual(['model.onnx_data']);
    expect(moved.placedDataFiles).toEqual(['model.onnx_data']);
    expect(statSync(elsewhere).size).toBeLessThan(64 * 1024);
    expect(statSync(join(dir, 'external-patched', 'model.onnx_data')).size).toBe(dataBefore.size);
    await expectMatchesReference(model('matmul'), elsewhere);

    const beside = join(dir, 'external', 'patched.onnx');
    const same = await exposeHiddenStates({ input: external, output: beside });
    expect(same.placedDataFiles).toEqual([]);
    await expectMatchesReference(model('matmul'), beside);
    expect(statSync(data).mtimeMs).toBe(dataBefore.mtimeMs);
  });

  test('--node with a valid tensor: the candidate, or any activation (type left to onnxruntime)', async () => {
    const candidate = inspectModel(model('gemm')).candidates[0]!.name;
    const named = join(dir, 'node', 'candidate.onnx');
    const result = await exposeHiddenStates({ input: model('gemm'), output: named, node: candidate });
    expect(result).toMatchObject({ status: 'added', tensor: candidate });
    expect(result.type?.dims).toEqual(['batch_size', 'sequence_length', HIDDEN]);
    await expectMatchesReference(model('gemm'), named);

    // The embedding lookup: a tensor the graph declares no type for.
    const embedded = readModel(model('gemm')).graph!.node.find((n) => n.opType === 'Gather')!.output[0]!;
    const other = join(dir, 'node', 'embedded.onnx');
    expect((await exposeHiddenStates({ input: model('gemm'), output: other, node: embedded })).type).toBeUndefined();
    expect((await run(other)).hidden?.dims).toEqual([1, TOKENS.length, HIDDEN]);
  });

  test('--node with an unknown name fails, listing candidates with shapes', async () => {
    const out = join(dir, 'bad', 'unknown-node.onnx');
    const message = await expectAppError(
      exposeHiddenStates({ input: model('matmul'), output: out, node: 'no/such/tensor' }),
      'INVALID_ARGUMENT',
      /no tensor named no\/such\/tensor/,
    );
    expect(message).toContain(`candidates: ${inspectModel(model('matmul')).candidates[0]!.name} [batch_size, sequence_length, ${HIDDEN}]`);
    expect(existsSync(out)).toBe(false);
  });

  test('a file that is not ONNX fails cleanly', async () => {
    const notOnnx = join(dir, 'bad', 'notes.onnx');
    writeFileSync(notOnnx, 'these are not the weights you are looking for\n');
    const out = join(dir, 'bad', 'from-notes.onnx');
    await expectAppError(exposeHiddenStates({ input: notOnnx, output: out }), 'INVALID_ARGUMENT', /not an ONNX model/);
    expect(existsSync(out)).toBe(false);
  });

  test('a model without a logits output fails cleanly', async () => {
    const input = join(dir, 'bad', 'no-logits.onnx');
    writeNoLogitsModel(input);
    const out = join(dir, 'bad', 'from-no-logits.onnx');
    await expectAppError(exposeHiddenStates({ input, output: out }), 'FAILED_PRECONDITION', /no graph output named logits \(outputs: scores\)/);
    expect(existsSync(out)).toBe(false);
  });

  test('two MatMuls reaching logits: ambiguous, both listed', async () => {
    const input = join(dir, 'bad', 'two-heads.onnx');
    writeAmbiguousModel(input);
    const out = join(dir, 'bad', 'from-two-heads.onnx');
    const message = await expectAppError(exposeHiddenStates({ input, output: out }), 'FAILED_PRECONDITION', /2 MatMul\/Gemm nodes reach logits/);
    expect(message).toContain('x [batch, seq, 8]');
    expect(message).toContain('scaled_x [batch, seq, 8]');
    expect(message).toContain('--node');
    expect(existsSync(out)).toBe(false);
  });
});

describe('inspectModel', () => {
  test('lists the interface, the weights and the LM head input of a tiny-qwen2 pack', () => {
    const d = inspectModel(model('matmul'));
    expect(d.inputs.map((i) => i.name)).toEqual([
      'input_ids',
      'attention_mask',
      'position_ids',
      'past_key_values.0.key',
      'past_key_values.0.value',
      'past_key_values.1.key',
      'past_key_values.1.value',
      'num_logits_to_keep',
    ]);
    expect(d.outputs.map((o) => o.name)).toEqual(['logits', 'present.0.key', 'present.0.value', 'present.1.key', 'present.1.value']);
    expect(d.outputs[0]).toEqual({ name: 'logits', elemType: 'float32', shape: ['batch_size', 'sequence_length', VOCAB] });
    expect(d.vocabSize).toBe(VOCAB);
    expect(d.hasHiddenStates).toBe(false);
    expect(d.initializers.external).toBe(false);
    expect(d.initializers.parameters).toBeGreaterThan(2 * VOCAB * HIDDEN);
    expect(d.opCounts.find((o) => o.opType === 'MatMul')?.count).toBe(19);
    expect(d.candidates).toHaveLength(1);
    expect(d.candidates[0]).toMatchObject({ elemType: 'float32', shape: ['batch_size', 'sequence_length', HIDDEN], weight: 'lm_head.weight', chosen: true });
    expect(formatInspection(d)).toContain(`* ${d.candidates[0]!.name}`);
  });
});

describe('models CLI', () => {
  const cli = (...args: string[]) => Bun.spawnSync([process.execPath, CLI, ...args], { stdout: 'pipe', stderr: 'pipe' });

  test('inspect prints the interface and the chosen candidate', () => {
    const r = cli('inspect', model('gemm'));
    const text = r.stdout.toString();
    expect(r.exitCode).toBe(0);
    expect(text).toContain('logits');
    expect(text).toMatch(/input_ids\s+int64\s+\[batch_size, sequence_length\]/);
    expect(text).toMatch(/\* \S+\s+float32\s+\[batch_size, sequence_length, 64\]\s+→ \S+ \(Gemm\)/);
  });

  test('bad input: one error line, non-zero exit, no output', () => {
    const input = join(dir, 'bad', 'cli-two-heads.onnx');
    writeAmbiguousModel(input);
    const out = join(dir, 'bad', 'cli-out.onnx');
    const r = cli('expose-hidden', '--in', input, '--out', out);
    const stderr = r.stderr.toString().trim();
    expect(r.exitCode).toBe(1);
    expect(stderr).toMatch(/^error: .*cannot tell which is the LM head/);
    expect(stderr.split('\n')).toHaveLength(1);
    expect(existsSync(out)).toBe(false);
  });
});
