/**
 * The held-out report's search towards top-1's routed share (src/tools/router/paired-share.ts): each next
 * threshold comes from the runs already made on either side of the target, not from a fresh bisection.
 */
import { expect, test } from 'bun:test';
import { nextThreshold } from '../src/tools/router/paired-share.ts';

test('interpolates between the closest runs on either side of the target share', () => {
  expect(
    nextThreshold(
      [
        { tau: 0.4, share: 0.1 },
        { tau: 0.6, share: 0.3 },
      ],
      0.2,
    ),
  ).toBeCloseTo(0.5, 12);
  // A quarter of the way in share is a quarter of the way in τ.
  expect(
    nextThreshold(
      [
        { tau: 0.2, share: 0.1 },
        { tau: 0.6, share: 0.3 },
      ],
      0.15,
    ),
  ).toBeCloseTo(0.3, 12);
  // Of several runs it takes the highest τ below the target and the lowest above it.
  expect(
    nextThreshold(
      [
        { tau: 0.1, share: 0.02 },
        { tau: 0.3, share: 0.12 },
        { tau: 0.5, share: 0.3 },
        { tau: 0.9, share: 0.7 },
      ],
      0.21,
    ),
  ).toBeCloseTo(0.4, 12);
});

test('with runs on one side only, the other end is τ = 0 (nothing routed) or τ = 1 (everything)', () => {
  expect(nextThreshold([{ tau: 0.5, share: 0.4 }], 0.2)).toBeCloseTo(0.25, 12);
  expect(nextThreshold([{ tau: 0.5, share: 0.1 }], 0.55)).toBeCloseTo(0.75, 12);
});

test('a threshold already run is not run again: halfway instead, and nothing once that was run too', () => {
  // The share jumped: interpolation lands on 0.5, which was run, so halfway between the bracket.
  const seen = [
    { tau: 0.4, share: 0.1 },
    { tau: 0.5, share: 0.2 },
    { tau: 0.6, share: 0.3 },
  ];
  expect(nextThreshold(seen, 0.2)).toBeUndefined();
  expect(
    nextThreshold(
      [
        { tau: 0.4, share: 0.1 },
        { tau: 0.45, share: 0.15 },
        { tau: 0.6, share: 0.3 },
      ],
      0.25,
    ),
  ).toBeCloseTo(0.55, 12);
  expect(
    nextThreshold(
      [
        { tau: 0.4, share: 0.1 },
        { tau: 0.6, share: 0.5 },
        { tau: 0.5, share: 0.3 },
      ],
      0.3,
    ),
  ).toBeUndefined();
});
