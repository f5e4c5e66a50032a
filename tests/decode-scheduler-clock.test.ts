/**
 * The scheduler's runner on the demo edge model with a clock the test moves: a wait for the last pass's
 * sequences ends at its deadline on that clock, not after a number of event-loop turns or real
 * milliseconds; a sequence coming back ends it at once.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { DecodeScheduler } from '../src/shared/model/scheduler/decode-scheduler.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

let model: DecoderModel;
beforeAll(async () => {
  model = await DecoderModel.load(loadModelPack((await ensureDemoPacks()).edgePack), { threads: 1 });
});
afterAll(async () => {
  await model.release();
});

test('a step whose pass mate is missing waits until gatherMs on the injected clock, then runs alone; the mate coming back joins it', async () => {
  let clock = 0;
  const scheduler = DecodeScheduler.over(model, { maxBatch: 4, gatherMs: 50, now: () => clock })!;
  const [a, b] = [scheduler.newSequence(), scheduler.newSequence()];
  try {
    expect((await Promise.all([a.append([1]), b.append([1])])).map((r) => r.batchSize)).toEqual([2, 2]);

    // b is missing: real time passes, the clock does not, the step waits.
    let settled = false;
    const alone = a.append([5]).then((r) => ((settled = true), r));
    const runs = model.stats.runs;
    await Bun.sleep(120);
    expect([settled, model.stats.runs]).toEqual([false, runs]);
    clock = 50;
    expect((await alone).batchSize).toBe(1);

    // Two steps queued at once share a pass; then b comes back while a's step waits for it: one pass again.
    const together = await Promise.all([a.append([6]), b.append([6])]);
    expect(together.map((r) => r.batchSize)).toEqual([2, 2]);
    const waiting = a.append([7]);
    await Bun.sleep(20);
    const joining = b.append([7]);
    expect([(await waiting).batchSize, (await joining).batchSize]).toEqual([2, 2]);
  } finally {
    a.dispose();
    b.dispose();
  }
});
