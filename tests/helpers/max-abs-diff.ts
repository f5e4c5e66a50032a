/** The largest absolute difference between two equally long float arrays (their lengths are asserted equal). */
import { expect } from 'bun:test';

export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}
