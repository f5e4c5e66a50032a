/**
 * The pool of released fused KV buffers (src/shared/model/kv-buffer-pool.ts): what it hands out is zeros of the
 * size asked for, recycled memory first; pinned memory (a snapshot's) and views are never recycled; it
 * never holds more than its bound. With a real fused model: sequences on released buffers give exactly the
 * logits of the same sequences on new memory, run the same way (batched) on a second model of the same pack.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { plainPassPoolBytes } from '../src/shared/model/kv-plain-layout.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { KvBufferPool, SPARE_MIN_BYTES, type SpareMaker } from '../src/shared/model/kv-buffer-pool.ts';
import { prefaultedBuffer } from '../src/shared/model/prefaulted-buffers.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';

describe('KvBufferPool', () => {
  test('recycles released buffers of the asked size, most recent first, zeroed', () => {
    const pool = new KvBufferPool(1024);
    const [a, b] = [pool.take(8), pool.take(8)];
    a.fill(3);
    b.fill(4);
    pool.release(a);
    pool.release(b);
    expect(pool.heldBytes).toBe(64);
    const again = pool.take(8);
    expect(again).toBe(b);
    expect([...again]).toEqual(new Array(8).fill(0));
    expect(pool.take(4)).not.toBe(a); // no buffer of 4 elements was released
    expect(pool.take(8)).toBe(a);
    expect(pool.stats).toEqual({ taken: 5, reused: 2, sparesAsked: 0 });
    expect(pool.heldBytes).toBe(0);
  });

  test('never recycles pinned memory, views into larger memory, or a buffer twice', () => {
    const pool = new KvBufferPool(1024);
    const pinned = new Float32Array(8);
    pool.pin(pinned);
    pool.release(pinned);
    pool.release(new Float32Array(new ArrayBuffer(64), 0, 8));
    expect(pool.heldBytes).toBe(0);
    const once = new Float32Array(8);
    pool.release(once);
    pool.release(once);
    expect(pool.heldBytes).toBe(32);
  });

  test('a view of a buffer it handed out brings the whole buffer back; views of other memory, pinned memory and a second release do not', () => {
    const pool = new KvBufferPool(1024);
    const taken = pool.take(16);
    pool.releaseBufferOf(taken.subarray(0, 6));
    expect(pool.heldBytes).toBe(64);
    const again = pool.take(16);
    expect(again.buffer).toBe(taken.buffer);
    pool.releaseBufferOf(again.subarray(0, 6));
    pool.releaseBufferOf(again.subarray(0, 2)); // the same buffer again
    expect(pool.heldBytes).toBe(64);
    pool.releaseBufferOf(new Float32Array(16).subarray(0, 6)); // onnxruntime's memory, say
    const pinned = pool.take(8);
    pool.pin(pinned);
    pool.releaseBufferOf(pinned.subarray(0, 4));
    expect(pool.heldBytes).toBe(64);
  });

  test('holds at most its bound, dropping the least recently released', () => {
    const pool = new KvBufferPool(100);
    const [a, b, c] = [new Float32Array(10), new Float32Array(10), new Float32Array(5)];
    pool.release(a);
    pool.release(b); // 80 bytes
    pool.release(c); // 100 bytes: at the bound
    expect(pool.heldBytes).toBe(100);
    pool.release(new Float32Array(1)); // over: a goes
    expect(pool.heldBytes).toBe(64);
    expect(pool.take(10)).toBe(b);
    expect(pool.take(10)).not.toBe(a);
    expect(() => new KvBufferPool(-1)).toThrow('maxBytes must be a non-negative number');
  });

  describe('spares', () => {
    const large = SPARE_MIN_BYTES / 4; // elements of the smallest size that gets a spare
    /** A maker that records what it was asked and hands out buffers only when told to. */
    function heldMaker() {
      const asked: number[] = [];
      const pending: (() => void)[] = [];
      const make: SpareMaker = (elements) =>
        new Promise((resolve) => {
          asked.push(elements);
          pending.push(() => resolve(new Float32Array(elements)));
        });
      return {
        make,
        asked,
        deliver: async () => {
          for (const go of pending.splice(0)) go();
          await Promise.resolve();
        },
      };
    }

    test('a take that finds nothing of a large size asks for one spare of it; the next take of that size gets it', async () => {
      const maker = heldMaker();
      const pool = new KvBufferPool(4 * SPARE_MIN_BYTES, maker.make);
      const first = pool.take(large);
      expect(maker.asked).toEqual([large]);
      await maker.deliver();
      expect(pool.heldBytes).toBe(SPARE_MIN_BYTES);
      const second = pool.take(large);
      expect(second).not.toBe(first);
      expect(second.length).toBe(large);
      expect(pool.stats).toEqual({ taken: 2, reused: 1, sparesAsked: 1 });
      // A hit asks for nothing; small sizes never get a spare.
      expect(maker.asked).toEqual([large]);
      pool.take(large - 1);
      expect(maker.asked).toEqual([large]);
    });

    test('spares being made count towards the bound: no more are asked for than it holds', async () => {
      const maker = heldMaker();
      const pool = new KvBufferPool(2 * SPARE_MIN_BYTES, maker.make);
      for (let i = 0; i < 4; i++) pool.take(large);
      expect(maker.asked).toEqual([large, large]);
      await maker.deliver();
      expect(pool.heldBytes).toBe(2 * SPARE_MIN_BYTES);
    });

    test('a maker that fails costs only the spare: takes go on allocating, and later misses ask again', async () => {
      let calls = 0;
      const pool = new KvBufferPool(4 * SPARE_MIN_BYTES, () => (calls++, Promise.reject(new Error('no worker'))));
      expect(pool.take(large).length).toBe(large);
      await new Promise((resolve) => setImmediate(resolve));
      expect(pool.take(large).length).toBe(large);
      expect(calls).toBe(2);
      expect(pool.heldBytes).toBe(0);
    });

    test('the worker-made buffers are zeros of the asked size, transferred whole', async () => {
      const buffers = await Promise.all([prefaultedBuffer(large), prefaultedBuffer(large), prefaultedBuffer(large)]);
      expect(buffers.map((b) => b.length)).toEqual([large, large, large]);
      for (const b of buffers) {
        expect(b.byteOffset).toBe(0);
        expect(b.buffer.byteLength).toBe(SPARE_MIN_BYTES);
        expect(b.every((x) => x === 0)).toBe(true);
      }
      expect(new Set(buffers.map((b) => b.buffer)).size).toBe(3);
    });
  });
});

describe('recycled buffers in a fused model', () => {
  const work = mkdtempSync(join(tmpdir(), 'kv-pool-'));
  let recycling: DecoderModel;
  let fresh: DecoderModel;
  let schedulers: Map<DecoderModel, DecodeScheduler>;
  beforeAll(async () => {
    await writeRandomPack({ preset: 'tiny-qwen2', out: join(work, 'fused'), seed: 11, hiddenStatesOutput: true, layout: 'fused' });
    const pack = loadModelPack(join(work, 'fused'));
    recycling = await DecoderModel.load(pack, { threads: 1 });
    fresh = await DecoderModel.load(pack, { threads: 1 });
    schedulers = new Map([recycling, fresh].map((model) => [model, DecodeScheduler.over(model, { maxBatch: 4 })!]));
  }, 120_000);
  afterAll(async () => {
    await recycling?.release();
    await fresh?.release();
    rmSync(work, { recursive: true, force: true });
  });

  const prompt = (n: number, offset: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 29 + offset) % 180));

  /** Three sequences prefilled, then decoded together (one batched pass a step); each one's logits per step. */
  async function decodeThree(model: DecoderModel): Promise<Float32Array[][]> {
    const sequences = [1, 2, 3].map(() => schedulers.get(model)!.newSequence());
    await Promise.all(sequences.map((s, i) => s.append(prompt(30 + (i + 1) * 20, i + 1))));
    const logits: Float32Array[][] = [[], [], []];
    for (const t of [7, 11, 13, 17, 19]) {
      const results = await Promise.all(sequences.map((s) => s.append([t])));
      results.forEach((r, i) => logits[i]!.push(r.logits));
    }
    for (const s of sequences) s.dispose();
    return logits;
  }

  test('sequences on released buffers, prefilled alone and decoded batched, give exactly the logits of sequences on new memory', async () => {
    // Leave released buffers behind: a long sequence (it grows past several buffers) and a short one.
    for (const n of [300, 40]) {
      const s = recycling.newSequence();
      await s.append(prompt(n, n));
      await s.append([5]);
      s.dispose();
    }
    const before = recycling.kvPool.stats.reused;
    // The same computation on both models, so the comparison is exact on any CPU: only where the sequences'
    // buffers come from differs (new memory on `fresh`, the released buffers on `recycling`).
    const expected = await decodeThree(fresh);
    const got = await decodeThree(recycling);
    expect(schedulers.get(recycling)!.stats.sizes[3]).toBeGreaterThan(0);
    expect(recycling.kvPool.stats.reused).toBeGreaterThan(before);
    got.forEach((logits, i) => logits.forEach((l, k) => expect(l).toEqual(expected[i]![k]!)));
  });
});

describe("the plain layout's batched passes", () => {
  const work = mkdtempSync(join(tmpdir(), 'kv-pool-plain-'));
  let pack: ReturnType<typeof loadModelPack>;
  beforeAll(async () => {
    await writeRandomPack({ preset: 'tiny-qwen2', out: join(work, 'plain'), seed: 12, hiddenStatesOutput: true, layout: 'plain' });
    pack = loadModelPack(join(work, 'plain'));
  }, 120_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  const prompt = (n: number, offset: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 31 + offset) % 180));
  const PROMPTS = [50, 70, 90].map((n, i) => prompt(n, i + 1));
  const STEPS = 6;

  /** The three prompts decoded greedily at once (batched passes); each one's ids and logits per step. */
  async function decodeThree(scheduler: DecodeScheduler): Promise<{ ids: number[][]; logits: Float32Array[][] }> {
    const sequences = PROMPTS.map(() => scheduler.newSequence());
    let results = await Promise.all(sequences.map((s, i) => s.append(PROMPTS[i]!)));
    const ids: number[][] = [[], [], []];
    const logits: Float32Array[][] = [[], [], []];
    for (let step = 0; step < STEPS; step++) {
      const next = results.map((r) => r.logits.indexOf(Math.max(...r.logits)));
      next.forEach((id, i) => ids[i]!.push(id));
      results = await Promise.all(sequences.map((s, i) => s.append([next[i]!])));
      results.forEach((r, i) => logits[i]!.push(r.logits));
    }
    for (const s of sequences) s.dispose();
    return { ids, logits };
  }

  test("gathered batch buffers and each row's new cache come from the pool and go back to it; recycled memory gives exactly the logits of new memory", async () => {
    const recycling = await DecoderModel.load(pack, { threads: 1 });
    const fresh = await DecoderModel.load(pack, { threads: 1 });
    const [onRecycling, onFresh] = [DecodeScheduler.over(recycling, { maxBatch: 4 })!, DecodeScheduler.over(fresh, { maxBatch: 4 })!];
    try {
      const expected = await decodeThree(onFresh);
      await decodeThree(onRecycling); // leaves the pool holding buffers of these sizes
      const before = { ...recycling.kvPool.stats };
      const together = onRecycling.stats.promptsTogether;
      const got = await decodeThree(onRecycling);
      expect(onRecycling.stats.sizes[3]).toBe(2 * STEPS);
      // Every batched pass takes one buffer per cache tensor for the gather and one per row for its new
      // cache: the decode passes of three rows, and the pass of the prompts that shared one (two here).
      const prompts = onRecycling.stats.promptsTogether - together;
      expect(prompts).toBe(2);
      const takes = recycling.kvPool.stats.taken - before.taken;
      expect(takes).toBe(recycling.io.pastNames.length * (STEPS * (1 + 3) + (1 + prompts)));
      // The run before left every size behind: each take finds memory already mapped.
      expect(recycling.kvPool.stats.reused - before.reused).toBe(takes);
      expect(recycling.kvPool.heldBytes).toBeGreaterThan(0);
      expect(got.ids).toEqual(expected.ids);
      got.logits.forEach((perStep, i) => perStep.forEach((l, k) => expect(l).toEqual(expected.logits[i]![k]!)));
    } finally {
      await recycling.release();
      await fresh.release();
    }
  });

  test('a pass whose buffers the pool cannot hold runs in smaller passes: the same ids, logits within 1e-4 of each sequence alone', async () => {
    const alone = await DecoderModel.load(pack, { threads: 1 });
    // Room for two rows of up to 94 cached positions (the longest prompt plus its steps), not for three.
    const bound = plainPassPoolBytes(alone, [94, 94]);
    expect(plainPassPoolBytes(alone, [50, 70, 90])).toBeGreaterThan(bound);
    const bounded = await DecoderModel.load(pack, { threads: 1, kvPoolBytes: bound });
    const scheduler = DecodeScheduler.over(bounded, { maxBatch: 4 })!;
    try {
      const got = await decodeThree(scheduler);
      const sizes = scheduler.stats.sizes;
      expect(sizes[3] ?? 0).toBe(0);
      expect(sizes[2]).toBe(STEPS);
      expect(sizes[1]).toBe(STEPS);
      for (const [i, ids] of PROMPTS.entries()) {
        const s = alone.newSequence();
        let out = await s.append(ids);
        for (let step = 0; step < STEPS; step++) {
          const id = out.logits.indexOf(Math.max(...out.logits));
          expect(id).toBe(got.ids[i]![step]!);
          out = await s.append([id]);
          const worst = out.logits.reduce((m, x, j) => Math.max(m, Math.abs(x - got.logits[i]![step]![j]!)), 0);
          expect(worst).toBeLessThan(1e-4);
        }
        s.dispose();
      }
    } finally {
      await alone.release();
      await bounded.release();
    }
  });
});
