import { expect, test } from 'bun:test';
import { UniformShareRouter } from '../src/tools/bench/uniform-share-router.ts';

const ids = (n: number) => Array.from({ length: n }, () => 0);
const none = new Float32Array(0);

test('a position scores the same whatever the model says there, and another seed scores differently', async () => {
  const router = new UniformShareRouter(1);
  const a = await router.score(new Float32Array([1, 2]), new Float32Array([3]), ids(17));
  const b = await router.score(none, none, ids(17));
  expect(a).toBe(b);
  expect(await new UniformShareRouter(2).score(none, none, ids(17))).not.toBe(a);
});

test('scores are uniform in [0, 1): τ routes about τ of the positions, with no run of neighbours alike', async () => {
  const router = new UniformShareRouter(1);
  const scores: number[] = [];
  const context: number[] = [];
  for (let n = 0; n < 20_000; n++, context.push(0)) scores.push(await router.score(none, none, context));
  for (const s of scores) expect(s >= 0 && s < 1).toBe(true);
  for (const tau of [0.1, 0.3, 0.5]) {
    const share = scores.filter((s) => s < tau).length / scores.length;
    // σ of a share over 20,000 positions is at most 0.0036: 0.015 is beyond 4σ.
    expect(Math.abs(share - tau)).toBeLessThan(0.015);
  }
  // Consecutive positions are unrelated (a Bernoulli process): both routed at τ 0.3 about 9% of the time.
  let both = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i]! < 0.3 && scores[i - 1]! < 0.3) both++;
  expect(Math.abs(both / (scores.length - 1) - 0.09)).toBeLessThan(0.015);
});
