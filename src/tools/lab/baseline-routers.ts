/**
 * Routers the evaluation compares the trained router with, and a probe that watches what the edge model
 * was sure of along a run. They plug into the decoding loop like any other `Router`.
 */
import { logitStats } from '../../edge/routing/router-features.ts';
import type { Router, RouterInfo } from '../../edge/routing/router.ts';
import { topProbability } from '../../shared/model/logits.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { ALL_EXTRA_WIDTH } from './feature-matrix.ts';
import type { TeacherForced } from './forced-records.ts';
import { MAX_SCORE } from './max-score.ts';

/** The edge model's top-1 probability, capped below 1 like the trained router so that τ = 1 routes every token. */
export function cappedTopProbability(logits: Float32Array): number {
  return Math.min(topProbability(logits), MAX_SCORE);
}

/** A uniform random score in [0, 1): at threshold p it routes each token with probability p. Seeded. */
export class RandomRouter implements Router {
  readonly info: RouterInfo = { name: 'baseline:random', hiddenSize: null, defaultThreshold: 0.5 };
  private readonly random: () => number;

  constructor(seed: number) {
    this.random = seededRandom(seed);
  }

  async score(): Promise<number> {
    return this.random();
  }

  async release(): Promise<void> {}
}

/** Routes by the edge model's own (capped) top-1 probability. */
export class TopProbabilityRouter implements Router {
  readonly info: RouterInfo = { name: 'baseline:top1-probability', hiddenSize: null, defaultThreshold: 0.5 };

  async score(_hidden: Float32Array, logits: Float32Array): Promise<number> {
    return cappedTopProbability(logits);
  }

  async release(): Promise<void> {}
}

/** 1 / (1 + H) of the edge distribution's entropy H (nats): low where the edge model is unsure, so those route first. */
export function entropyScore(entropy: number): number {
  return Math.min(1 / (1 + entropy), MAX_SCORE);
}

/**
 * The top-1 and entropy baselines' scores of teacher-forced records, read from the logit statistics every
 * record keeps (the first two extra columns: entropy, then top-1 probability).
 */
export function forcedBaselineScores(forced: Pick<TeacherForced, 'count' | 'extra'>): { top1: Float32Array; entropy: Float32Array } {
  const n = forced.count;
  return {
    top1: Float32Array.from({ length: n }, (_, i) => Math.min(forced.extra[i * ALL_EXTRA_WIDTH + 1]!, MAX_SCORE)),
    entropy: Float32Array.from({ length: n }, (_, i) => entropyScore(forced.extra[i * ALL_EXTRA_WIDTH]!)),
  };
}

/** Routes by the edge model's entropy (highest first), through `entropyScore`. */
export class EntropyRouter implements Router {
  readonly info: RouterInfo = { name: 'baseline:entropy', hiddenSize: null, defaultThreshold: 0.5 };

  async score(_hidden: Float32Array, logits: Float32Array): Promise<number> {
    return entropyScore(logitStats(logits).entropy);
  }

  async release(): Promise<void> {}
}

/** Passes scoring on to `inner` and records the edge model's top-1 probability at every scored position. */
export class ProbeRouter implements Router {
  readonly topProbabilities: number[] = [];

  constructor(private readonly inner: Router) {}

  get info(): RouterInfo {
    return this.inner.info;
  }

  async score(hidden: Float32Array, logits: Float32Array, recentIds?: readonly number[], previousHidden?: Float32Array): Promise<number> {
    this.topProbabilities.push(cappedTopProbability(logits));
    return this.inner.score(hidden, logits, recentIds, previousHidden);
  }

  async release(): Promise<void> {}
}
