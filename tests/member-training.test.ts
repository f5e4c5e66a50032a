/**
 * The router's ensemble members fitted in worker threads are the members fitted one after another in this
 * thread, to the bit; a member that fails rejects the fit instead of leaving it waiting.
 */
import { expect, test } from 'bun:test';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { trainMembers } from '../src/tools/router/member-training.ts';
import { initialWeights } from '../src/tools/router/mlp.ts';
import type { Dataset } from '../src/tools/router/train-mlp.ts';

/** A separable problem with noise: keep (1) where a fixed direction of the inputs is positive. */
function dataset(rows: number, inputSize: number, seed: number): Dataset {
  const random = seededRandom(seed);
  const features = Float32Array.from({ length: rows * inputSize }, () => random() * 2 - 1);
  const labels = new Uint8Array(rows);
  for (let r = 0; r < rows; r++) {
    let dot = 0;
    for (let i = 0; i < inputSize; i++) dot += features[r * inputSize + i]! * Math.cos(i);
    labels[r] = dot + (random() - 0.5) * 0.4 > 0 ? 1 : 0;
  }
  return { features, labels, rows };
}

const INPUT = 12;
const train = dataset(600, INPUT, 1);
const validation = dataset(150, INPUT, 2);
const members = [0, 1, 2].map((k) => ({ inputSize: INPUT, hiddenUnits: 8, seed: 10 + k, maxEpochs: 6, learningRate: 1e-2 }));

test('members fitted side by side in workers equal the members fitted in turn, and every epoch is reported', async () => {
  const epochs: number[][] = [[], [], []];
  const inWorkers = await trainMembers(train, validation, members, (k, e) => epochs[k]!.push(e.epoch), 3);
  const inTurn = await trainMembers(train, validation, members, () => {}, 1);
  expect(inWorkers).toEqual(inTurn);
  expect(epochs).toEqual(inTurn.map((r) => Array.from({ length: r.epochsRun }, (_, i) => i + 1)));
  // Different seeds, different members: the comparison above is not of three copies of one fit.
  expect(inTurn[0]!.weights.w1).not.toEqual(inTurn[1]!.weights.w1);
  expect(inTurn[0]!.history.at(-1)!.validationLoss).toBeLessThan(Math.log(2));
});

test('a member that cannot train rejects the fit with its reason', async () => {
  const wrongSize = {
    ...members[1]!,
    initial: { ...initialWeights(INPUT + 1, 8, 0, 0.5), mean: new Float32Array(INPUT + 1), std: new Float32Array(INPUT + 1).fill(1) },
  };
  await expect(trainMembers(train, validation, [members[0]!, wrongSize], () => {}, 2)).rejects.toThrow(
    'router member training failed: internal: initial weights are 13×8, not 12×8',
  );
});
