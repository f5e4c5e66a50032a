import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { perturbationFromEnv, perturbHiddenStates } from './helpers/perturbed-hidden-states.ts';

let edge: DecoderModel;
let cloud: DecoderModel;
const IDS = [1, 403, 407, 261, 378, 426, 266, 281];

async function forward(model: DecoderModel): Promise<{ hidden: Float32Array; logits: Float32Array }> {
  const sequence = model.newSequence();
  try {
    const out = await sequence.append(IDS, { allPositions: true });
    return { hidden: out.allHidden!.slice(), logits: out.allLogits!.slice() };
  } finally {
    sequence.dispose();
  }
}

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  edge = await DecoderModel.load(loadModelPack(demo.edgePack));
  cloud = await DecoderModel.load(loadModelPack(demo.cloudPack));
});

afterAll(async () => {
  await edge.release();
  await cloud.release();
});

describe('perturbHiddenStates (another CPU’s last bits, simulated)', () => {
  test("changes every one of the edge model's hidden-state values by at most about 1e-6 of itself, and nothing else", async () => {
    const before = await forward(edge);
    const cloudBefore = await forward(cloud);
    const perturbation = perturbHiddenStates({ packDir: edge.pack.dir, seed: 1 });
    let after: Awaited<ReturnType<typeof forward>>;
    let cloudAfter: Awaited<ReturnType<typeof forward>>;
    try {
      after = await forward(edge);
      cloudAfter = await forward(cloud);
    } finally {
      perturbation.restore();
    }
    expect(perturbation.perturbedValues).toBe(before.hidden.length);
    let changed = 0;
    before.hidden.forEach((v, i) => {
      if (after.hidden[i] !== v) changed++;
      // 1e-6 of the value, plus the float32 rounding of the result (2^-24 of it).
      expect(Math.abs(after.hidden[i]! - v)).toBeLessThanOrEqual(Math.abs(v) * (1e-6 + 2 ** -24));
    });
    expect(changed).toBeGreaterThan(before.hidden.length * 0.9); // a few round back to the same float32
    expect(perturbation.largestRelativeChange).toBeGreaterThan(0.5e-6);
    expect(after.logits).toEqual(before.logits);
    expect(cloudAfter.hidden).toEqual(cloudBefore.hidden);
    // Restored: the original forward pass again.
    expect((await forward(edge)).hidden).toEqual(before.hidden);
  });

  test('the same seed gives the same noise, another seed another', async () => {
    const run = async (seed: number) => {
      const perturbation = perturbHiddenStates({ packDir: edge.pack.dir, seed });
      try {
        return (await forward(edge)).hidden;
      } finally {
        perturbation.restore();
      }
    };
    const one = await run(1);
    expect(await run(1)).toEqual(one);
    expect(await run(2)).not.toEqual(one);
  });

  test('PERTURB_HIDDEN_STATES: unset or empty is no perturbation; a seed is one; anything else is refused', () => {
    expect(perturbationFromEnv(edge.pack.dir, {})).toBeUndefined();
    expect(perturbationFromEnv(edge.pack.dir, { PERTURB_HIDDEN_STATES: '' })).toBeUndefined();
    const perturbation = perturbationFromEnv(edge.pack.dir, { PERTURB_HIDDEN_STATES: '3' });
    expect(perturbation).toBeDefined();
    perturbation!.restore();
    expect(() => perturbationFromEnv(edge.pack.dir, { PERTURB_HIDDEN_STATES: '1e-6' })).toThrow(
      'PERTURB_HIDDEN_STATES must be a seed (a whole number ≥ 0), got "1e-6"',
    );
  });
});
