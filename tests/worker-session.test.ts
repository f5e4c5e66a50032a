/**
 * A decoder's session on a worker thread (worker-session.ts, session-worker.ts, decoder-session.ts), on real
 * onnxruntime sessions: the same outputs bit for bit as on the main thread, alone and batched; the main
 * thread's event loop turning while a pass runs; failures that reject (never hang); provider fallback
 * warnings reaching the caller; the fused export that writes its cache in place staying on the main thread; and
 * the edge's and the shim's --model-thread.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createBackend } from '../src/cloud/backends/create-backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { shimConfig } from '../src/cloud/config.ts';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge } from '../src/edge/server/edge-server.ts';
import { AppError } from '../src/shared/errors.ts';
import { DecoderModel, type AppendResult, type AppendableSequence } from '../src/shared/model/decoder-model.ts';
import { loadModelPack, type ModelPack } from '../src/shared/model/model-pack.ts';
import { ort } from '../src/shared/model/ort.ts';
import { runSession } from '../src/shared/model/run-session.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { openSessionOnWorker } from '../src/shared/model/worker-session.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const work = mkdtempSync(join(tmpdir(), 'worker-session-'));
const FUSED = join(work, 'fused');
const FUSED_IN_PLACE = join(work, 'fused-in-place');
let demo: ModelPack;

beforeAll(async () => {
  demo = loadModelPack((await ensureDemoPacks()).cloudPack);
  await writeRandomPack({ preset: 'tiny-qwen2', out: FUSED, seed: 3, hiddenStatesOutput: true, layout: 'fused' });
  await writeRandomPack({ preset: 'tiny-qwen2', out: FUSED_IN_PLACE, seed: 3, hiddenStatesOutput: true, layout: 'fused', newKeyValuesOutputs: false });
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Log lines written by a logger, parsed. */
function capturingLogger() {
  const lines: { level: string; msg: string; [field: string]: unknown }[] = [];
  return { lines, log: createLogger('test', 'debug', (line) => lines.push(JSON.parse(line))) };
}

/** The bytes of an array: equal bytes are equal bits, -0 and NaN payloads included. */
const bytes = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);

function expectSameBits(a: AppendResult, b: AppendResult): void {
  expect(a.logits.length).toBeGreaterThan(0);
  expect(a.hidden.length).toBeGreaterThan(0);
  for (const key of ['logits', 'hidden', 'previousHidden'] as const) expect(bytes(a[key]).equals(bytes(b[key]))).toBe(true);
}

/** A prompt and single-token appends on each model's own sequence, compared step by step. */
async function expectSameAppends(onWorker: AppendableSequence, onMain: AppendableSequence, vocab: number): Promise<void> {
  const steps = [Array.from({ length: 9 }, (_, i) => 3 + ((i * 37) % (vocab - 3))), [17], [101 % vocab], [5], [230 % vocab]];
  for (const tokens of steps) expectSameBits(await onWorker.append(tokens), await onMain.append(tokens));
}

describe('on the demo pack', () => {
  let onWorker: DecoderModel;
  let onMain: DecoderModel;
  beforeAll(async () => {
    onWorker = await DecoderModel.load(demo, { thread: 'worker', threads: 1 });
    onMain = await DecoderModel.load(demo, { thread: 'main', threads: 1 });
  });
  afterAll(async () => {
    await onWorker.release();
    await onMain.release();
  });

  test('a sequence on the worker gives the same logits and hidden states bit for bit', async () => {
    expect(onWorker.thread).toBe('worker');
    const [a, b] = [onWorker.newSequence(), onMain.newSequence()];
    await expectSameAppends(a, b, demo.vocabSize);
    a.dispose();
    b.dispose();
  });

  test('a batched pass (decode scheduler) gives the same as on the main thread', async () => {
    const schedulers = [onWorker, onMain].map((model) => DecodeScheduler.over(model, { maxBatch: 4 })!);
    const results = await Promise.all(
      schedulers.map(async (scheduler) => {
        const sequences = [0, 1, 2].map(() => scheduler.newSequence());
        await Promise.all(sequences.map((s, i) => s.append([1, 10 + i, 20 + i])));
        const step = await Promise.all(sequences.map((s, i) => s.append([40 + i])));
        for (const s of sequences) s.dispose();
        return step;
      }),
    );
    expect(results[0]!.some((r) => (r.batchSize ?? 1) > 1)).toBe(true);
    results[0]!.forEach((r, i) => expectSameBits(r, results[1]![i]!));
  });

  test("the main thread's event loop turns while a pass runs on the worker, and not while one runs on the main thread", async () => {
    /** Event-loop turns (setImmediate callbacks, one per turn) that run before a long prompt's pass resolves. */
    const turnsDuring = async (model: DecoderModel) => {
      const sequence = model.newSequence();
      let turns = 0;
      let running = true;
      const turn = () => {
        if (!running) return;
        turns++;
        setImmediate(turn);
      };
      setImmediate(turn);
      await sequence.append(Array.from({ length: 400 }, (_, i) => 3 + (i % 500)));
      running = false;
      sequence.dispose();
      return turns;
    };
    // The control: onnxruntime-node runs the pass inside one immediate, so at most a turn or two go by.
    expect(await turnsDuring(onMain)).toBeLessThan(5);
    expect(await turnsDuring(onWorker)).toBeGreaterThan(20);
  });
});

describe('a session on a worker', () => {
  const idsFeeds = (dims: number[]) => {
    const n = dims.reduce((a, b) => a * b, 1);
    return {
      input_ids: new ort.Tensor(
        'int64',
        BigInt64Array.from({ length: n }, () => 5n),
        dims,
      ),
    };
  };

  test('a bad feed rejects with an INTERNAL error naming the inputs, and the session runs on after it', async () => {
    const { session } = await openSessionOnWorker(demo.modelPath, {}, ['cpu']);
    try {
      // One token on an empty cache: ids, mask and positions [1, 1]; the cache [1, heads, 0, head_dim]; the last logits kept.
      const good = Object.fromEntries(
        session.inputNames.map((name) => {
          if (name === 'num_logits_to_keep') return [name, new ort.Tensor('int64', BigInt64Array.of(1n), [])];
          if (name.startsWith('past_key_values')) return [name, new ort.Tensor('float32', new Float32Array(0), [1, demo.numKvHeads, 0, demo.headDim])];
          return [name, new ort.Tensor('int64', BigInt64Array.of(name === 'position_ids' ? 0n : 1n), [1, 1])];
        }),
      );
      const bad = { ...good, ...idsFeeds([1, 2, 3]) };
      const error = await runSession(session, bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe('INTERNAL');
      expect((error as AppError).message).toContain('onnxruntime run failed');
      expect((error as AppError).message).toContain('input_ids: int64[1,2,3]');
      const out = await runSession(session, good);
      expect(out.logits!.dims).toEqual([1, 1, demo.vocabSize]);
    } finally {
      await session.release();
    }
  });

  test('an output to be written in place is refused with a clear error', async () => {
    const { session } = await openSessionOnWorker(demo.modelPath, {}, ['cpu']);
    try {
      const logits = new ort.Tensor(new Float32Array(demo.vocabSize), [1, 1, demo.vocabSize]);
      const error = await session.run(idsFeeds([1, 1]), { logits }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe('INTERNAL');
      expect((error as AppError).message).toContain('cannot write outputs in place (logits)');
    } finally {
      await session.release();
    }
  });

  test('a terminated worker rejects the pending run and every later one; a released session too', async () => {
    const { session } = await openSessionOnWorker(demo.modelPath, {}, ['cpu']);
    const pending = session.run(idsFeeds([1, 1]));
    session.terminate();
    await expect(pending).rejects.toThrow("the model session's worker thread terminated");
    await expect(session.run(idsFeeds([1, 1]))).rejects.toThrow('terminated');
    await session.release(); // nothing left to release: resolves

    const released = await openSessionOnWorker(demo.modelPath, {}, ['cpu']);
    await released.session.release();
    await expect(released.session.run(idsFeeds([1, 1]))).rejects.toThrow('the model session was released');
  });

  test("provider fallback happens on the worker and its warning reaches the caller's logger; a refusal keeps its code", async () => {
    const { lines, log } = capturingLogger();
    const { session, executionProviders } = await openSessionOnWorker(demo.modelPath, {}, ['nosuchprovider', 'cpu'], log);
    await session.release();
    expect(executionProviders).toEqual(['cpu']);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 'warn', msg: 'execution provider not available; falling back', missing: ['nosuchprovider'] }),
    );

    const refused = await openSessionOnWorker(demo.modelPath, {}, ['nosuchprovider']).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe('INVALID_ARGUMENT');
    expect((refused as AppError).message).toContain('execution provider nosuchprovider is not available');
  });
});

describe('the fused layout', () => {
  test('with new_key_values.* it runs on the worker, the same bits as on the main thread', async () => {
    const pack = loadModelPack(FUSED);
    const [onWorker, onMain] = [await DecoderModel.load(pack, { thread: 'worker' }), await DecoderModel.load(pack, { thread: 'main' })];
    try {
      expect(onWorker.layout.name).toBe('fused');
      expect(onWorker.thread).toBe('worker');
      const [a, b] = [onWorker.newSequence(), onMain.newSequence()];
      await expectSameAppends(a, b, pack.vocabSize);
      a.dispose();
      b.dispose();
    } finally {
      await onWorker.release();
      await onMain.release();
    }
  });

  test('written in place (no new_key_values.*) it falls back to the main thread, and the log says why', async () => {
    const { lines, log } = capturingLogger();
    const model = await DecoderModel.load(loadModelPack(FUSED_IN_PLACE), { thread: 'worker', log });
    try {
      expect(model.layout.name).toBe('fused');
      expect(model.io.newKeyValues).toBe(false);
      expect(model.thread).toBe('main');
      const info = lines.find((l) => l.msg === 'the decoder runs on the main thread, not a worker thread');
      expect(info?.level).toBe('info');
      expect(String(info?.reason)).toContain('in place');
      const sequence = model.newSequence();
      expect((await sequence.append([1, 2, 3])).logits.length).toBe(model.pack.vocabSize);
      sequence.dispose();
    } finally {
      await model.release();
    }
  });
});

describe('--model-thread', () => {
  test('the edge runs its model on a worker by default and answers a completion; main when asked', async () => {
    for (const [flags, thread] of [
      [[], 'worker'],
      [['--model-thread', 'main'], 'main'],
    ] as const) {
      const { lines, log } = capturingLogger();
      const config = parseEdgeConfig(['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', 'none', ...flags], {});
      const edge = await startEdge(config, { log });
      try {
        expect(lines.find((l) => l.msg === 'edge ready')?.modelThread).toBe(thread);
        const response = await fetch(new URL('/v1/completions', edge.url), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: basename(config.edgeModel), prompt: 'Once upon a time', max_tokens: 6, temperature: 0 }),
        });
        expect(response.status).toBe(200);
        const body = (await response.json()) as { choices: { text: string }[]; usage: { completion_tokens: number } };
        expect(body.usage.completion_tokens).toBeGreaterThan(0);
      } finally {
        await edge.stop();
      }
    }
  });

  test("the shim's embedded backend: worker by default, main when asked", async () => {
    for (const thread of ['worker', 'main'] as const) {
      const backend = await createBackend(shimConfig({ modelThread: thread }), undefined);
      try {
        expect(backend).toBeInstanceOf(EmbeddedBackend);
        expect((backend as EmbeddedBackend).model.thread).toBe(thread);
      } finally {
        await backend.close();
      }
    }
  });
});
