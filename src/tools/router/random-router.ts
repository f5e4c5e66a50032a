/**
 * A router pack with random weights of a given width, for speed measurements at a real model's shape
 * (the scores mean nothing; the work per call is exactly that of a trained router of that width).
 */
import { extraWidth, FEATURE_GROUPS } from '../../edge/router-features.ts';
import { initialWeights } from './mlp.ts';
import { writeRouterPack } from './router-pack.ts';

export interface RandomRouterOptions {
  hiddenSize: number;
  hiddenUnits: number;
  seed: number;
  /** Recorded in router.json as the edge pack it is meant for. */
  slm: string;
}

export function randomRouterSource(o: RandomRouterOptions): Record<string, unknown> {
  return { tool: 'random-router', hiddenSize: o.hiddenSize, hiddenUnits: o.hiddenUnits, seed: o.seed, features: FEATURE_GROUPS };
}

export async function writeRandomRouterPack(out: string, o: RandomRouterOptions): Promise<void> {
  await writeRouterPack(out, {
    // Every feature group, so that a speed measurement includes computing the logit and repetition features.
    weights: initialWeights(o.hiddenSize + extraWidth(FEATURE_GROUPS), o.hiddenUnits, o.seed),
    meta: { hidden_size: o.hiddenSize, slm: o.slm, default_threshold: 0.5, features: [...FEATURE_GROUPS], training: { random_weights: true, hidden_units: o.hiddenUnits, seed: o.seed } },
    source: randomRouterSource(o),
  });
}
