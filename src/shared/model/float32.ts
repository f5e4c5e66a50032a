/**
 * Numbers that arrive as protobuf `float` fields. A float32 has no exact 0.8: the nearest one is
 * 0.800000011920929 as a double, and a value read off the wire would be logged, compared and sent on as
 * that. The decimal the sender most likely wrote is the shortest one that rounds to the same float32,
 * as `Float.toString` in Java and `repr` of a numpy.float32 print it; reading a float field as that makes
 * logs, events and metrics show the 0.8 that was asked for.
 *
 * @example
 * shortestFloat32(Math.fround(0.8)); // 0.8
 * shortestFloat32(Math.fround(1 / 3)); // 0.33333334
 */

/** Significant digits that tell every float32 apart (FLT_DECIMAL_DIG). */
const FLOAT32_DIGITS = 9;

/**
 * The shortest decimal that rounds to the float32 nearest `x`. A value that is not a float32 (a double
 * with more precision) is first rounded to one, as the wire would. Non-finite values come back as they are.
 */
export function shortestFloat32(x: number): number {
  if (!Number.isFinite(x)) return x;
  const single = Math.fround(x);
  // toPrecision drops the sign of -0.
  if (single === 0) return single;
  for (let digits = 1; digits < FLOAT32_DIGITS; digits++) {
    const candidate = Number(single.toPrecision(digits));
    if (Math.fround(candidate) === single) return candidate;
  }
  return Number(single.toPrecision(FLOAT32_DIGITS));
}
