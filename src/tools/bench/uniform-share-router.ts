/**
 * A router for latency benchmarks that routes a set share of positions, spread evenly: each position's
 * score is a hash of its index in the context, uniform in [0, 1), so τ is the expected routed share and
 * routed positions follow a Bernoulli process, the same on every prompt. A trained router on a random-weight
 * pack (the 0.5B shape) scores whole prompts alike and routes all of one prompt and none of the next,
 * which measures the prompts rather than the routing. The score depends on the position only, so runs with
 * and without speculation route the same positions, as the exactness check needs.
 *
 * @example
 * const router = new UniformShareRouter(1);
 * await router.score(hidden, logits, ids); // < 0.1 for about 10% of positions
 */
import type { Router, RouterInfo } from '../../edge/routing/router.ts';
import { seededRandom } from '../../shared/seeded-random.ts';

export class UniformShareRouter implements Router {
  readonly info: RouterInfo;

  constructor(private readonly seed: number) {
    this.info = { name: `uniform-share:${seed}`, hiddenSize: null, defaultThreshold: 0.1 };
  }

  async score(_hidden: Float32Array, _logits: Float32Array, recentIds: readonly number[] = []): Promise<number> {
    // mulberry32's first draw mixes its seed well, so consecutive positions get unrelated scores.
    return seededRandom(Math.imul(this.seed, 0x9e3779b1) + recentIds.length)();
  }

  async release(): Promise<void> {}
}
