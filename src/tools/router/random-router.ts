/**
 * A router pack with random weights of a given width, for speed measurements at a real model's shape
 * (the scores mean nothing; the work per call is exactly that of a trained router of that width).
 */
import { FEATURE_GROUPS } from '../../edge/routing/router-features.ts';
import { inputWidth } from '../lab/feature-matrix.ts';
import { initialWeights, normalSampler } from './mlp.ts';
import { writeRouterPack } from './router-pack.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { edgeModelIdentity } from '../../edge/routing/edge-model-identity.ts';
import { DEFAULT_ROUTER_THRESHOLD } from '../../shared/contract/router-threshold.ts';

/** Token rows of a random router: about as many ids as a trained router of a large vocabulary gives a row of their own. */
export const RANDOM_TOKEN_ROWS = 16_384;

export interface RandomRouterOptions {
  hiddenSize: number;
  /** The edge's vocabulary (its logits row), for the `token` group's table. */
  vocabSize: number;
  /** All hidden units: a trained router's members × hidden units each. */
  hiddenUnits: number;
  seed: number;
  /** Recorded in router.json as the edge pack it is meant for (`slm`). */
  edgeModel: string;
  /** The edge pack's folder, when there is one: its identity goes in router.json's `edge_model`, which the edge checks at start. */
  edgeModelDir?: string;
  /** Replace a router pack this project's tools wrote at `out` (a benchmark's stale one). */
  force?: boolean;
}

export function randomRouterSource(o: RandomRouterOptions): Record<string, unknown> {
  return { tool: 'random-router', hiddenSize: o.hiddenSize, vocabSize: o.vocabSize, hiddenUnits: o.hiddenUnits, seed: o.seed, features: FEATURE_GROUPS };
}

export async function writeRandomRouterPack(out: string, o: RandomRouterOptions): Promise<void> {
  // Every feature group, so that a speed measurement includes computing the logit and repetition features and the token lookup.
  const weights = initialWeights(inputWidth(o.hiddenSize, FEATURE_GROUPS), o.hiddenUnits, o.seed);
  const rows = Math.min(RANDOM_TOKEN_ROWS, o.vocabSize);
  const normal = normalSampler(seededRandom(o.seed + 1));
  weights.tokens = {
    vocabSize: o.vocabSize,
    ids: Int32Array.from({ length: rows }, (_, i) => i),
    vectors: Float32Array.from({ length: (rows + 1) * o.hiddenUnits }, () => normal() * 0.1),
  };
  await writeRouterPack(
    out,
    {
      weights,
      meta: {
        hidden_size: o.hiddenSize,
        slm: o.edgeModel,
        ...(o.edgeModelDir ? { edge_model: edgeModelIdentity(o.edgeModelDir) } : {}),
        default_threshold: DEFAULT_ROUTER_THRESHOLD,
        features: [...FEATURE_GROUPS],
        training: { random_weights: true, hidden_units: o.hiddenUnits, seed: o.seed },
      },
      source: randomRouterSource(o),
    },
    { tool: 'random router', force: o.force },
  );
}
