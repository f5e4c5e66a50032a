/**
 * The router being trained, as a decoding-loop `Router`: the TypeScript MLP over the same inputs the
 * exported ONNX graph reads (hidden state, the previous position's, the pack's extra feature groups and
 * the proposed token). On-policy rounds generate with it between two fits, before any pack exists.
 *
 * Why a second inference beside router.onnx (OnnxRouter at run time, batch-scorer.ts over matrices):
 * the trainer's weights live in TypeScript between rounds, and exporting and loading a graph per round
 * would only add float rounding to what the rollouts see. All three are pinned to the same scores on
 * the same inputs by tests/router-context-features.test.ts and tests/router-training.test.ts.
 *
 * @example
 * const router = new MlpRouter(weights, ['hidden', 'logit_stats', 'repetition']);
 */
import type { Router, RouterInfo } from '../../edge/routing/router.ts';
import {
  extraWidth,
  logitExtremes,
  logitSums,
  readsPreviousHidden,
  readsToken,
  statsFromSums,
  writeExtraFeatures,
  type FeatureGroup,
} from '../../edge/routing/router-features.ts';
import { predict, type MlpWeights } from './mlp.ts';

export class MlpRouter implements Router {
  readonly info: RouterInfo;

  constructor(
    private readonly weights: MlpWeights,
    private readonly features: readonly FeatureGroup[],
  ) {
    this.info = { name: 'training:mlp', hiddenSize: null, defaultThreshold: 0.5, features };
  }

  async score(hidden: Float32Array, logits: Float32Array, recentIds: readonly number[] = [], previousHidden?: Float32Array): Promise<number> {
    // One pass for the extremes, shared by the statistics and the proposed token, as OnnxRouter does.
    const extremes = logitExtremes(logits);
    const width = extraWidth(this.features);
    const extra = new Float32Array(width);
    if (width > 0) writeExtraFeatures(extra, this.features, statsFromSums(extremes, logitSums(logits, extremes.max)), recentIds);
    const previous = readsPreviousHidden(this.features) ? hidden.length : 0;
    const row = new Float32Array(hidden.length + previous + extra.length);
    row.set(hidden);
    // Zeros, as router.onnx is fed, when the caller has no previous position.
    if (previous && previousHidden) row.set(previousHidden, hidden.length);
    row.set(extra, hidden.length + previous);
    const proposed = readsToken(this.features) ? Int32Array.of(extremes.argmax) : undefined;
    return predict(this.weights, row, 1, proposed)[0]!;
  }

  async release(): Promise<void> {}
}
