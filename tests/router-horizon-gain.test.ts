/**
 * The gain of a route over a horizon (horizon-gain.ts) on the demo pair's real packs: checked against the same
 * branches written and scored from scratch, one fresh sequence each, and, with no tokens after the choice,
 * against cloud-nll's gain from teacher forcing. Branches end at a stop id, as generation does.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { argmax } from '../src/shared/model/logits.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { InProcessScorer } from '../src/tools/lab/cloud-scorer.ts';
import { ForcedRecords, repeatsFourGramAt } from '../src/tools/lab/forced-records.ts';
import { chargeLoopSteps, horizonGains, medianRouteGain } from '../src/tools/router/horizon-gain.ts';
import { horizonTarget, labelsFor, nllGainTarget } from '../src/tools/router/labels.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

let edgeModel: DecoderModel;
let cloudModel: DecoderModel;
let ids: number[];
const first = 5;
/** The demo pair's end tokens never come up inside this sentence: branches run their full length. */
const noStops: ReadonlySet<number> = new Set();

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  edgeModel = await DecoderModel.load(loadModelPack(demo.edgePack));
  cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
  const tokenizer = await TextTokenizer.fromPack(demo.edgePack);
  ids = [1, ...tokenizer.encode('Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog.')];
});

afterAll(async () => {
  await edgeModel.release();
  await cloudModel.release();
});

/** The reference: the branch written by a fresh sequence up to a stop id, the cloud's NLL of it after the prefix, and its loop steps. */
async function branchFromScratch(prefix: number[], token: number, tokens: number, stopIds: ReadonlySet<number>) {
  const sequence = edgeModel.newSequence();
  const written = [token];
  try {
    let out = await sequence.append([...prefix, token]);
    while (written.length <= tokens && !stopIds.has(written.at(-1)!)) {
      written.push(argmax(out.logits));
      out = await sequence.append([written.at(-1)!]);
    }
  } finally {
    sequence.dispose();
  }
  const cloud = cloudModel.newSequence();
  try {
    const all = await cloud.append([...prefix, ...written], { allPositions: true });
    const vocab = cloudModel.pack.vocabSize;
    let nll = 0;
    for (let j = prefix.length; j < prefix.length + written.length; j++) {
      const row = all.allLogits!.subarray((j - 1) * vocab, j * vocab);
      const max = Math.max(...row);
      const logSum = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
      nll -= row[written[j - prefix.length]!]! - logSum;
    }
    const trajectory = [...prefix, ...written];
    const repeats = written.filter((id, k) => repeatsFourGramAt(trajectory, prefix.length + k - 1, id)).length;
    return { nll, repeats, length: written.length, written };
  } finally {
    cloud.dispose();
  }
}

describe('the gain of a route over a horizon', () => {
  test('each choice where the two top-1s differ: NLL of the kept branch less the routed one, as written from scratch', async () => {
    const records = new ForcedRecords(edgeModel, new InProcessScorer(cloudModel));
    const reading = await records.read(ids, { first });
    const { gains, keptRepeats, routedRepeats } = await horizonGains({
      edgeModel,
      scorer: new InProcessScorer(cloudModel),
      ids,
      first,
      choices: reading.rows,
      tokens: 3,
      stopIds: noStops,
    });
    expect(gains.length).toBe(ids.length - 1 - first);
    const differing = reading.rows.flatMap((row, j) => (row.proposed !== row.cloudTop ? [j] : []));
    // The demo pair disagrees somewhere in a sentence this long, and agrees somewhere too.
    expect(differing.length).toBeGreaterThan(0);
    expect(differing.length).toBeLessThan(reading.rows.length);
    for (const [j, row] of reading.rows.entries()) {
      if (row.proposed === row.cloudTop) {
        expect(gains[j]).toBe(0);
        continue;
      }
      const prefix = ids.slice(0, first + j + 1);
      const kept = await branchFromScratch(prefix, row.proposed, 3, noStops);
      const routed = await branchFromScratch(prefix, row.cloudTop, 3, noStops);
      expect(gains[j]).toBeCloseTo(kept.nll - routed.nll, 3);
      expect([keptRepeats[j], routedRepeats[j]]).toEqual([kept.repeats, routed.repeats]);
    }
    // A cloud behind a shim is read by Score calls over the whole prefix instead of a cache kept here: the same gains.
    const inProcess = new InProcessScorer(cloudModel);
    const remoteLike = {
      description: 'remote',
      maxContext: inProcess.maxContext,
      vocabSize: inProcess.vocabSize,
      exact: true,
      calls: 0,
      score: inProcess.score.bind(inProcess),
    };
    const scored = await horizonGains({ edgeModel, scorer: remoteLike, ids, first, choices: reading.rows, tokens: 3, stopIds: noStops });
    for (const j of differing) expect(scored.gains[j]).toBeCloseTo(gains[j]!, 3);
  });

  test("with no tokens after the choice it is cloud-nll's gain: ln p_cloud(cloud top-1) − ln p_cloud(edge top-1)", async () => {
    const scorer = new InProcessScorer(cloudModel);
    const reading = await new ForcedRecords(edgeModel, scorer).read(ids, { first });
    const { gains } = await horizonGains({ edgeModel, scorer, ids, first, choices: reading.rows, tokens: 0, stopIds: noStops });
    for (const [j, row] of reading.rows.entries()) expect(gains[j]).toBeCloseTo(Math.log(row.cloudTopProb) - Math.log(row.cloudProbOfEdgeTop1), 3);
  });

  test('a branch ends at a stop id; branches of different lengths are compared per token, scaled to the longer', async () => {
    const scorer = new InProcessScorer(cloudModel);
    const reading = await new ForcedRecords(edgeModel, scorer).read(ids, { first });
    // A stand-in for an end of turn: the second id of a kept branch that its routed branch never writes.
    const differing = reading.rows.flatMap((row, j) => (row.proposed !== row.cloudTop ? [j] : []));
    let stop: number | undefined;
    for (const j of differing) {
      const prefix = ids.slice(0, first + j + 1);
      const kept = await branchFromScratch(prefix, reading.rows[j]!.proposed, 4, noStops);
      const routed = await branchFromScratch(prefix, reading.rows[j]!.cloudTop, 4, noStops);
      if (!routed.written.includes(kept.written[1]!)) {
        stop = kept.written[1]!;
        break;
      }
    }
    expect(stop).toBeDefined();
    const stopIds = new Set([stop!]);
    const { gains } = await horizonGains({ edgeModel, scorer, ids, first, choices: reading.rows, tokens: 4, stopIds });
    let cut = 0;
    for (const [j, row] of reading.rows.entries()) {
      if (row.proposed === row.cloudTop) continue;
      const prefix = ids.slice(0, first + j + 1);
      const kept = await branchFromScratch(prefix, row.proposed, 4, stopIds);
      const routed = await branchFromScratch(prefix, row.cloudTop, 4, stopIds);
      if (kept.length !== routed.length) cut++;
      const length = Math.max(kept.length, routed.length);
      expect(gains[j]).toBeCloseTo(length * (kept.nll / kept.length - routed.nll / routed.length), 3);
    }
    // The stand-in did end some branch sooner than the other: the per-token comparison was exercised.
    expect(cut).toBeGreaterThan(0);
  });
});

test("horizon-nll's targets: cloud-nll's for a gain, its mirror towards keep for a loss, the loop rules on top", () => {
  expect(horizonTarget(0)).toBe(0.5);
  expect(horizonTarget(Math.log(3))).toBeCloseTo(nllGainTarget(0.2, 0.6), 6);
  expect(horizonTarget(-1)).toBe(0.75);
  expect(horizonTarget(-1e9)).toBeCloseTo(1, 6);
  // Two records: a plain disagreement whose route loses over the horizon, and a loop entry whose route gains.
  const records = {
    count: 2,
    proposed: Int32Array.of(5, 5),
    cloudTop: Int32Array.of(6, 6),
    repeatsFourGram: Uint8Array.of(0, 0),
    cloudRepeatsFourGram: Uint8Array.of(0, 1),
    cloudTopProb: Float32Array.of(0.6, 0.6),
    cloudProbOfEdgeTop1: Float32Array.of(0.2, 0.2),
  } as unknown as Parameters<typeof labelsFor>[1];
  const horizon = { gains: Float32Array.of(-1, 2), keptRepeats: Uint8Array.of(0, 0), routedRepeats: Uint8Array.of(0, 0) };
  const { targets, labels } = labelsFor('horizon-nll', records, horizon);
  expect([...targets]).toEqual([0.75, 0.75]);
  // Divergence's binary label (a 3 to 1 preference: route), and keep at the loop entry.
  expect([...labels]).toEqual([0, 1]);
  expect(() => labelsFor('horizon-nll', records)).toThrow('horizon gains');
});

test('horizon-loop-nll: a routed branch that takes loops further than the kept one is a loss (0.75), one that takes them less far is routed', () => {
  const records = {
    count: 3,
    proposed: Int32Array.of(5, 5, 5),
    cloudTop: Int32Array.of(6, 6, 6),
    repeatsFourGram: Uint8Array.of(0, 0, 0),
    cloudRepeatsFourGram: Uint8Array.of(0, 0, 0),
    cloudTopProb: Float32Array.of(0.6, 0.6, 0.6),
    cloudProbOfEdgeTop1: Float32Array.of(0.5, 0.2, 0.2),
  } as unknown as Parameters<typeof labelsFor>[1];
  const horizon = { gains: Float32Array.of(0.5, 2, -1), keptRepeats: Uint8Array.of(1, 0, 3), routedRepeats: Uint8Array.of(1, 2, 0) };
  const { targets, labels } = labelsFor('horizon-loop-nll', records, horizon);
  // As many loop steps either way: the gain's target; more after the route: keep; fewer: route.
  expect([...targets]).toEqual([Math.fround(horizonTarget(0.5)), 0.75, 0]);
  expect(Math.abs(targets[0]! - 1 / 3)).toBeLessThan(1e-6);
  expect([...labels]).toEqual([1, 1, 0]);
  // horizon-loop-guard-nll: the same, but a route into more loop steps is kept outright.
  const guarded = labelsFor('horizon-loop-guard-nll', records, horizon);
  expect([...guarded.targets]).toEqual([Math.fround(horizonTarget(0.5)), 1, 0]);
  expect([...guarded.labels]).toEqual([1, 1, 0]);
});

test('--loop-cost charges each loop step of a branch: g + cost · (kept repeats − routed repeats)', () => {
  const reading = { gains: Float32Array.of(0.5, 2, -1), keptRepeats: Uint8Array.of(1, 0, 3), routedRepeats: Uint8Array.of(1, 2, 0) };
  const charged = chargeLoopSteps(reading, 0.75);
  expect([...charged.gains]).toEqual([0.5, 0.5, 1.25]);
  // The repeats stay as read, and so does the reading itself; a cost of 0 changes nothing.
  expect(charged.routedRepeats).toBe(reading.routedRepeats);
  expect([...reading.gains]).toEqual([0.5, 2, -1]);
  expect(chargeLoopSteps(reading, 0)).toBe(reading);
});

test("the default loop cost's scale is the median |g| where the top-1s differed (g 0 elsewhere)", () => {
  const reading = (gains: number[]) => ({
    gains: Float32Array.from(gains),
    keptRepeats: new Uint8Array(gains.length),
    routedRepeats: new Uint8Array(gains.length),
  });
  // Sizes 0.5, 1, 3 (a loss counts by its size); the zeros are positions where the two agreed.
  expect(medianRouteGain(reading([0, 3, 0, -1, 0.5, 0]))).toBe(1);
  // An even count: halfway between the middle two.
  expect(medianRouteGain(reading([2, -4, 0]))).toBe(3);
  expect(medianRouteGain(reading([0, 0]))).toBe(0);
});
