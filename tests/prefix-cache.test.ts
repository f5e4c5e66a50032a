/**
 * The prefix cache (src/shared/model/prefix-cache.ts) and the sequence snapshots it keeps: a restored cache
 * is the same KV bit for bit, in both decoder layouts; a sequence restored from it gives the logits and
 * hidden states of one that prefilled everything (exactly when the same forward passes follow, within
 * LOGIT_TOLERANCE when the prefill was split differently); the longest usable prefix is chosen; the
 * bytes held never exceed the bound under many inserts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBatchedPass } from '../src/shared/model/batched-step.ts';
import { DecoderModel, type AppendResult } from '../src/shared/model/decoder-model.ts';
import { copyKvPositions, restorableLength } from '../src/shared/model/kv-snapshot.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { ort } from '../src/shared/model/ort.ts';
import { PrefixCache } from '../src/shared/model/prefix-cache.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { maxAbsDiff } from './helpers/max-abs-diff.ts';

/**
 * A prefill split in two (cached prefix, then the rest) against one pass over everything: the same
 * float32 arithmetic over different matrix shapes, so the sums may round differently (measured: below 1e-5).
 */
const LOGIT_TOLERANCE = 1e-4;

const work = mkdtempSync(join(tmpdir(), 'prefix-cache-'));
const models: Record<'plain' | 'fused', DecoderModel> = {} as never;

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  models.plain = await DecoderModel.load(loadModelPack(demo.edgePack), { threads: 1 });
  // The fused layout needs a head_dim onnxruntime's GroupQueryAttention takes: tiny-qwen2 with random weights.
  await writeRandomPack({ preset: 'tiny-qwen2', out: join(work, 'fused'), seed: 7, hiddenStatesOutput: true, layout: 'fused' });
  models.fused = await DecoderModel.load(loadModelPack(join(work, 'fused')), { threads: 1 });
}, 120_000);
afterAll(async () => {
  await models.plain?.release();
  await models.fused?.release();
  rmSync(work, { recursive: true, force: true });
});

function ids(n: number, offset = 0): number[] {
  return Array.from({ length: n }, (_, i) => 3 + ((i * 37 + offset) % 200));
}

describe('restorableLength', () => {
  test('leaves one id to feed, two when restored short of the snapshot', () => {
    expect(restorableLength(10, 10, 12)).toBe(10);
    expect(restorableLength(10, 10, 11)).toBe(10);
    expect(restorableLength(10, 10, 10)).toBe(8); // restored to 9, the one id fed would need position 8's hidden state
    expect(restorableLength(10, 8, 9)).toBe(7);
    expect(restorableLength(10, 8, 20)).toBe(8);
    expect(restorableLength(10, 0, 20)).toBe(0);
    expect(restorableLength(10, 1, 2)).toBe(0);
  });
});

describe('copyKvPositions', () => {
  test('the first positions of every head, float32 and float16 bits alike', () => {
    // [1, 2 heads, capacity 3, head_dim 2]: element value = head * 100 + position * 10 + dim.
    const values = [0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121];
    const f32 = copyKvPositions(new ort.Tensor('float32', Float32Array.from(values), [1, 2, 3, 2]), 2);
    expect(f32.dims).toEqual([1, 2, 2, 2]);
    expect([...(f32.data as Float32Array)]).toEqual([0, 1, 10, 11, 100, 101, 110, 111]);
    const f16 = copyKvPositions(new ort.Tensor('float16', Uint16Array.from(values), [1, 2, 3, 2]), 1);
    expect(f16.type).toBe('float16');
    expect([...(f16.data as Uint16Array)]).toEqual([0, 1, 100, 101]);
    expect(() => copyKvPositions(f16, 2)).toThrow('cannot copy 2 positions');
  });
});

for (const layout of ['plain', 'fused'] as const) {
  describe(`snapshot and restore, ${layout} layout`, () => {
    test('a whole snapshot restored continues exactly like the sequence it came from', async () => {
      const model = models[layout];
      const source = model.newSequence();
      await source.append(ids(40));
      await source.append([7]);
      const snapshot = source.snapshot()!;
      expect(snapshot.tokens).toEqual([...ids(40), 7]);
      const copy = model.newSequence();
      copy.restore(snapshot, snapshot.tokens.length);
      // The plain layout never writes its past tensors, so a whole restore shares them; the fused buffers are written in place, so they are copied.
      const name = model.io.pastNames[0]!;
      const sharesSnapshot = (copy.cache[name]!.data as Float32Array).buffer === (snapshot.kv[name]!.data as Float32Array).buffer;
      expect(sharesSnapshot).toBe(layout === 'plain');
      const [a, b] = [await source.append([9]), await copy.append([9])];
      expect(b.logits).toEqual(a.logits);
      expect(b.hidden).toEqual(a.hidden);
      expect(b.previousHidden).toEqual(a.previousHidden);
      // What the source and the copy appended since, and their disposal, did not change the snapshot.
      expect(snapshot.tokens.length).toBe(41);
      for (const s of [source, copy]) s.dispose();
      const again = model.newSequence();
      again.restore(snapshot, snapshot.tokens.length);
      expect((await again.append([9])).logits).toEqual(b.logits);
      again.dispose();
    });

    test('a snapshot shares the cache it was taken from when that fills half its buffers, and nothing the sequence does after changes it', async () => {
      const model = models[layout];
      const source = model.newSequence();
      await source.append(ids(200, 3)); // fused: 200 of 224 positions; plain: exactly 200
      const snapshot = source.snapshot()!;
      const name = model.io.pastNames[0]!;
      expect((snapshot.kv[name]!.data as Float32Array).buffer).toBe((source.cache[name]!.data as Float32Array).buffer);
      const before = Object.fromEntries(model.io.pastNames.map((n) => [n, copyKvPositions(snapshot.kv[n]!, 200).data as Float32Array]));
      // Appends after the snapshot's positions, a rollback over some of them, a growth past the buffers, disposal.
      source.checkpoint();
      await source.append(ids(10, 50));
      source.rollback();
      await source.append(ids(70, 90));
      source.dispose();
      for (const n of model.io.pastNames) expect(copyKvPositions(snapshot.kv[n]!, 200).data as Float32Array).toEqual(before[n]!);
      // Restored, it continues exactly like a sequence that prefilled the same ids.
      const [fresh, restored] = [model.newSequence(), model.newSequence()];
      await fresh.append(ids(70, 40)); // the released buffers go back to the model's pool: never the pinned ones the snapshot shares
      await fresh.append(ids(130, 41));
      for (const n of model.io.pastNames) expect(copyKvPositions(snapshot.kv[n]!, 200).data as Float32Array).toEqual(before[n]!);
      fresh.dispose();
      const again = model.newSequence();
      await again.append(ids(200, 3));
      restored.restore(snapshot, 200);
      const [a, b] = [await again.append([9]), await restored.append([9])];
      expect(b.logits).toEqual(a.logits);
      expect(b.hidden).toEqual(a.hidden);
      for (const s of [again, restored]) s.dispose();
    });

    test('a short cache in a mostly free buffer is copied compact, so the bound counts only its positions', async () => {
      const model = models[layout];
      const source = model.newSequence();
      await source.append(ids(10)); // fused: 10 of 32 positions
      const snapshot = source.snapshot()!;
      const name = model.io.pastNames[0]!;
      const held = snapshot.kv[name]!;
      expect(held.dims[2]).toBe(10);
      if (layout === 'fused') expect((held.data as Float32Array).buffer).not.toBe((source.cache[name]!.data as Float32Array).buffer);
      const perTensor = (held.data as Float32Array).byteLength;
      expect(snapshot.bytes).toBe(perTensor * model.io.pastNames.length + snapshot.lastHidden.byteLength);
      source.dispose();
    });

    test('restored short of the snapshot: the rest fed on top equals one prefill of everything', async () => {
      const model = models[layout];
      const prompt = ids(300, 5); // past several KV_CAPACITY_STEPs: the fused buffers grow on restore's append
      const source = model.newSequence();
      await source.append(prompt.slice(0, 280));
      const snapshot = source.snapshot()!;
      source.dispose();

      const whole = model.newSequence();
      const expected = await whole.append(prompt);
      const restored = model.newSequence();
      restored.restore(snapshot, 250);
      expect(restored.length).toBe(250);
      await expect(restored.append([prompt[250]!])).rejects.toThrow('needs two or more tokens');
      const got = await restored.append(prompt.slice(250));
      expect(maxAbsDiff(got.logits, expected.logits)).toBeLessThan(LOGIT_TOLERANCE);
      expect(maxAbsDiff(got.hidden, expected.hidden)).toBeLessThan(LOGIT_TOLERANCE);
      expect(maxAbsDiff(got.previousHidden, expected.previousHidden)).toBeLessThan(LOGIT_TOLERANCE);
      for (const s of [whole, restored]) s.dispose();
      expect(model.stats.liveSequences).toBe(0);
    });
  });
}

describe('snapshots of caches a plain-layout batched pass wrote', () => {
  test('the first part of a pooled buffer: shared when it fills half of it, copied compact otherwise; bytes count the memory held', async () => {
    const model = models.plain;
    const name = model.io.pastNames[0]!;
    for (const [length, shared] of [
      [5, false],
      [40, true],
    ] as const) {
      const [a, b] = [model.newSequence(), model.newSequence()];
      await a.append(ids(length));
      await b.append(ids(length + 1, 5));
      await runBatchedPass(model, [
        { sequence: a, tokens: [7] },
        { sequence: b, tokens: [8] },
      ]);
      const data = a.cache[name]!.data as Float32Array;
      // length + 1 positions at the start of a buffer with room for a whole number of 32-position steps.
      const perPosition = data.byteLength / (length + 1);
      expect(data.buffer.byteLength).toBe(perPosition * Math.ceil((length + 1) / 32) * 32);
      const snapshot = a.snapshot()!;
      const held = snapshot.kv[name]!.data as Float32Array;
      expect(held.buffer === data.buffer).toBe(shared);
      expect(snapshot.bytes).toBe(held.buffer.byteLength * model.io.pastNames.length + snapshot.lastHidden.byteLength);
      expect(snapshot.bytes).toBe((shared ? 64 : length + 1) * perPosition * model.io.pastNames.length + snapshot.lastHidden.byteLength);
      // Restored, it continues as the sequence does.
      const restored = model.newSequence();
      restored.restore(snapshot, snapshot.tokens.length);
      const [x, y] = [await a.append([9]), await restored.append([9])];
      expect(y.logits).toEqual(x.logits);
      for (const s of [a, b, restored]) s.dispose();
    }
  });
});

describe('PrefixCache', () => {
  async function prefill(cache: PrefixCache, tokens: number[]): Promise<{ cachedTokens: number; result: AppendResult }> {
    const { sequence, cachedTokens } = cache.newSequence(tokens);
    try {
      const result = await sequence.append(tokens.slice(cachedTokens));
      cache.keep(sequence);
      return { cachedTokens, result };
    } finally {
      sequence.dispose();
    }
  }

  test('feeding a prompt copies no cache: the scheduler makes room for it before its first piece, a restore for the ids about to be fed', async () => {
    // A clock that stands still: after the one decode step below, the scheduler never counts as quiet, so prompts go in pieces.
    const model = await DecoderModel.load(loadModelPack(join(work, 'fused')), { threads: 1 });
    const scheduler = DecodeScheduler.over(model, { maxBatch: 2, prefillChunk: 64, now: () => 0 })!;
    try {
      const stepping = scheduler.newSequence();
      await stepping.append([ids(1, 5)[0]!]);
      const runsBefore = model.stats.runs;
      const cache = new PrefixCache(model, { maxBytes: 64 * 2 ** 20 });
      const prompt = ids(300, 9);
      const cold = scheduler.sequence(cache.newSequence(prompt).sequence);
      await cold.append(prompt); // five pieces of at most 64
      expect(model.stats.runs - runsBefore).toBe(5);
      expect(model.stats.kvBytesCopied).toBe(0);
      cache.keep(cold);
      cold.dispose();
      const longer = [...ids(250, 9).slice(0, 250), ...ids(120, 77)]; // 250 cached of the 300, then 120 new
      const warm = cache.newSequence(longer);
      expect(warm.cachedTokens).toBe(250);
      const warmSequence = scheduler.sequence(warm.sequence);
      await warmSequence.append(longer.slice(warm.cachedTokens));
      expect(model.stats.kvBytesCopied).toBe(0);
      warmSequence.dispose();
      stepping.dispose();
    } finally {
      await model.release();
    }
  });

  test('the longest usable prefix: a next turn reuses the whole earlier one, a shared head reuses the head', async () => {
    const cache = new PrefixCache(models.plain, { maxBytes: 64 * 2 ** 20 });
    const system = ids(60, 1);
    const turn1 = [...system, ...ids(20, 2)];
    expect((await prefill(cache, turn1)).cachedTokens).toBe(0);
    const turn2 = [...turn1, ...ids(15, 3)];
    expect((await prefill(cache, turn2)).cachedTokens).toBe(turn1.length);
    // turn2 supersedes turn1 (it starts with it): one entry.
    expect(cache.stats.entries).toBe(1);
    const other = [...system, ...ids(30, 4)];
    expect((await prefill(cache, other)).cachedTokens).toBe(system.length);
    // The same ids again: all but the last two, fed for the logits and the hidden state before them.
    const again = await prefill(cache, other);
    expect(again.cachedTokens).toBe(other.length - 2);
    const { result: fresh } = await prefill(new PrefixCache(models.plain, { maxBytes: 0 }), other);
    expect(maxAbsDiff(again.result.logits, fresh.logits)).toBeLessThan(LOGIT_TOLERANCE);
    expect(cache.stats).toMatchObject({
      entries: 2,
      lookedUpTokens: turn1.length + turn2.length + 2 * other.length,
      hitTokens: turn1.length + system.length + other.length - 2,
    });
  });

  test('a sequence an entry already holds is not copied again', async () => {
    const cache = new PrefixCache(models.plain, { maxBytes: 64 * 2 ** 20 });
    const seq = models.plain.newSequence();
    await seq.append(ids(30));
    expect(cache.keep(seq)).toBe(true);
    expect(cache.keep(seq)).toBe(false);
    expect(cache.stats.insertions).toBe(1);
    seq.dispose();
  });

  test('never above its bound under many inserts; least recently used evicted first', async () => {
    const probe = models.plain.newSequence();
    await probe.append(ids(50));
    const entryBytes = probe.snapshot()!.bytes;
    probe.dispose();
    const maxBytes = Math.floor(entryBytes * 3.5);
    const cache = new PrefixCache(models.plain, { maxBytes });
    const prompts = Array.from({ length: 40 }, (_, i) => ids(50, 1000 + i * 7));
    for (const [i, prompt] of prompts.entries()) {
      await prefill(cache, prompt);
      // Keep the first prompt in use: it must survive while the others come and go.
      if (i % 2 === 1) expect((await prefill(cache, prompts[0]!)).cachedTokens).toBe(48);
      expect(cache.stats.bytes).toBeLessThanOrEqual(maxBytes);
    }
    expect(cache.stats.entries).toBe(3);
    expect(cache.stats.bytes).toBe(3 * entryBytes);
    expect(cache.stats.evictions).toBe(37);
    expect((await prefill(cache, prompts[0]!)).cachedTokens).toBe(48);
    expect((await prefill(cache, prompts[1]!)).cachedTokens).toBe(0);
    expect(models.plain.stats.liveSequences).toBe(0);
  });

  test('a snapshot larger than the whole bound is not kept', async () => {
    const cache = new PrefixCache(models.plain, { maxBytes: 1024 });
    await prefill(cache, ids(50));
    expect(cache.stats).toMatchObject({ entries: 0, bytes: 0, insertions: 0 });
    expect(() => new PrefixCache(models.plain, { maxBytes: -1 })).toThrow('maxBytes must be a non-negative number');
  });
});
