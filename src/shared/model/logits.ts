/** Small numeric helpers over a logits vector. */

export function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** log Σ exp(x), computed without overflow. */
export function logSumExp(logits: ArrayLike<number>): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  return max + Math.log(sum);
}

/** The softmax probability of the largest entry: what the edge model's "confidence" means by default. */
export function topProbability(logits: ArrayLike<number>): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  return Math.exp(max - logSumExp(logits));
}

/** Natural-log softmax of the whole vector. */
export function logSoftmax(logits: ArrayLike<number>): Float64Array {
  const logZ = logSumExp(logits);
  const out = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) out[i] = logits[i]! - logZ;
  return out;
}

/** The `k` largest entries as `{ id, value }`, largest first; only those `keep` accepts, when given. */
export function topK(values: ArrayLike<number>, k: number, keep?: (id: number, value: number) => boolean): { id: number; value: number }[] {
  if (k <= 0) return [];
  const top: { id: number; value: number }[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    // `keep` is asked only of an entry that would enter the top.
    if (top.length === k && !(v > top[k - 1]!.value)) continue;
    if (keep && !keep(i, v)) continue;
    if (top.length === k) top[k - 1] = { id: i, value: v };
    else top.push({ id: i, value: v });
    top.sort((a, b) => b.value - a.value);
  }
  return top;
}
