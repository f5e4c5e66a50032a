/**
 * Token sampling against a reference that sorts the whole vocabulary: the same seeded draws pick the
 * same ids, for peaked, flat and tied distributions; the nucleus and the vocabulary limit hold.
 */
import { describe, expect, test } from 'bun:test';
import { argmax } from '../src/shared/model/logits.ts';
import { sampleToken } from '../src/shared/model/sampling.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';

/** Top-p sampling written the plain way: softmax, sort every id by weight (ties by id), cut at the mass. */
function referenceSample(logits: Float32Array, temperature: number, topP: number, random: () => number): number {
  if (temperature === 0) return argmax(logits);
  const max = Math.max(...logits);
  const weights = Array.from(logits, (v) => Math.exp((v - max) / temperature));
  const sum = weights.reduce((a, b) => a + b, 0);
  const order = weights.map((_, i) => i).sort((a, b) => weights[b]! - weights[a]! || a - b);
  const kept: number[] = [];
  let mass = 0;
  for (const id of order) {
    if (kept.length > 0 && (topP >= 1 ? false : mass >= topP * sum)) break;
    kept.push(id);
    mass += weights[id]!;
  }
  const pool = topP >= 1 ? weights.map((_, i) => i) : kept;
  let r = random() * pool.reduce((a, id) => a + weights[id]!, 0);
  for (const id of pool) {
    r -= weights[id]!;
    if (r < 0) return id;
  }
  return pool[pool.length - 1]!;
}

function logitsOf(kind: 'peaked' | 'flat' | 'tied', size: number, seed: number): Float32Array {
  const random = seededRandom(seed);
  const out = new Float32Array(size);
  for (let i = 0; i < size; i++) {
    if (kind === 'peaked') out[i] = random() * 4 + (i % 97 === 0 ? 12 : 0);
    else if (kind === 'flat') out[i] = random() * 0.01;
    else out[i] = Math.floor(random() * 4); // many exact ties
  }
  return out;
}

describe('sampleToken', () => {
  for (const kind of ['peaked', 'flat', 'tied'] as const) {
    test(`${kind} logits: the same ids as the full-sort reference for every seed, temperature and top-p`, () => {
      for (let seed = 0; seed < 6; seed++) {
        const logits = logitsOf(kind, 5000, seed);
        for (const temperature of [0, 0.3, 1, 2]) {
          for (const topP of [0.05, 0.5, 0.9, 0.999, 1]) {
            const a = seededRandom(seed * 31 + 7);
            const b = seededRandom(seed * 31 + 7);
            for (let draw = 0; draw < 5; draw++) {
              expect(sampleToken(logits, { temperature, topP, random: a })).toBe(referenceSample(logits, temperature, topP, b));
            }
          }
        }
      }
    });
  }

  test('a flat distribution over a Qwen-sized vocabulary (151,936 ids): the same ids as the reference', () => {
    const logits = logitsOf('flat', 151_936, 11);
    for (const topP of [0.5, 0.9]) {
      const a = seededRandom(5);
      const b = seededRandom(5);
      for (let draw = 0; draw < 3; draw++) expect(sampleToken(logits, { temperature: 0.7, topP, random: a })).toBe(referenceSample(logits, 0.7, topP, b));
    }
  });

  test('only ids inside the nucleus are drawn', () => {
    // Probabilities 0.5, 0.3, 0.15, 0.05: top-p 0.7 keeps the first two.
    const logits = Float32Array.from([0.5, 0.3, 0.15, 0.05].map(Math.log));
    const random = seededRandom(3);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) seen.add(sampleToken(logits, { temperature: 1, topP: 0.7, random }));
    expect([...seen].sort()).toEqual([0, 1]);
  });

  test('ids at or above vocabLimit are never chosen, even when they have the largest logits', () => {
    const logits = Float32Array.from([0, 1, 2, 50, 60]);
    expect(sampleToken(logits, { temperature: 0, topP: 1, random: Math.random, vocabLimit: 3 })).toBe(2);
    const random = seededRandom(5);
    for (let i = 0; i < 200; i++) expect(sampleToken(logits, { temperature: 5, topP: 0.9, random, vocabLimit: 3 })).toBeLessThan(3);
  });
});
