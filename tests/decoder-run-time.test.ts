/**
 * DecoderStats.runMs counts onnxruntime's runs from the moment each starts. onnxruntime-node starts a run from
 * a `setImmediate` callback, after the runs queued before it, so timing from the call would count every
 * queued run's wait as its own cost (four prompts asked for at once: about 2.5 times their real time).
 */
import { beforeAll, expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

let cloudPack: string;
beforeAll(async () => {
  cloudPack = (await ensureDemoPacks()).cloudPack;
});

const prompt = (n: number, offset: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 7 + offset) % 500));

test('one run at a time: each run is counted, within the wall time of its append', async () => {
  const model = await DecoderModel.load(loadModelPack(cloudPack), { threads: 1 });
  try {
    const sequence = model.newSequence();
    for (let k = 0; k < 3; k++) {
      const [runs, runMs] = [model.stats.runs, model.stats.runMs];
      const started = performance.now();
      await sequence.append(prompt(k === 0 ? 40 : 1, k));
      const wall = performance.now() - started;
      expect(model.stats.runs - runs).toBe(1);
      expect(model.stats.runMs - runMs).toBeGreaterThan(0);
      expect(model.stats.runMs - runMs).toBeLessThanOrEqual(wall);
    }
    sequence.dispose();
  } finally {
    await model.release();
  }
});

test('runs asked for together queue: their counted times do not overlap, so they sum to no more than the wall time', async () => {
  const model = await DecoderModel.load(loadModelPack(cloudPack), { threads: 1 });
  try {
    const sequences = Array.from({ length: 4 }, () => model.newSequence());
    const started = performance.now();
    await Promise.all(sequences.map((s, i) => s.append(prompt(120, i))));
    const wall = performance.now() - started;
    expect(model.stats.runs).toBe(4);
    expect(model.stats.runMs).toBeGreaterThan(0);
    expect(model.stats.runMs).toBeLessThanOrEqual(wall);
    for (const s of sequences) s.dispose();
  } finally {
    await model.release();
  }
});
