/** The token trie of `bench fleet`'s SGLang fake: exact cached prefixes and least-recently-used eviction. */
import { expect, test } from 'bun:test';
import { TokenTrie } from '../src/tools/bench/token-trie.ts';

test('match gives the longest cached prefix; shared prefixes are stored once', () => {
  const trie = new TokenTrie({ capacity: 100 });
  expect(trie.match([1, 2, 3])).toBe(0);
  trie.insert([1, 2, 3, 4]);
  expect(trie.size).toBe(4);
  expect(trie.match([1, 2, 3, 4, 5, 6])).toBe(4);
  expect(trie.match([1, 2, 9])).toBe(2);
  expect(trie.match([2, 3])).toBe(0);
  trie.insert([1, 2, 7]);
  expect(trie.size).toBe(5);
  expect(trie.match([1, 2, 7, 8])).toBe(3);
  expect(trie.match([1, 2, 3, 4])).toBe(4);
});

test('a session whose context grows step after step finds all but its new tokens cached', () => {
  const trie = new TokenTrie({ capacity: 1_000 });
  const context = [1, 10, 11, 12, 13];
  const cached: number[] = [];
  for (let step = 0; step < 4; step++) {
    cached.push(trie.match(context));
    trie.insert([...context, 100 + step]);
    context.push(100 + step, 200 + step, 300 + step);
  }
  // Each step's context is the last one's, its output, and two new edge tokens.
  expect(cached).toEqual([0, 6, 9, 12]);
});

test('beyond its capacity it evicts the least recently used leaves, then their parents', () => {
  const trie = new TokenTrie({ capacity: 6 });
  trie.insert([1, 2, 3]);
  trie.insert([4, 5, 6]);
  // [1, 2, 3] is used again: [4, 5, 6] is now the older sequence.
  expect(trie.match([1, 2, 3])).toBe(3);
  trie.insert([1, 2, 3, 7, 8]);
  expect(trie.size).toBe(6);
  expect(trie.evicted).toBe(2);
  expect(trie.match([4, 5, 6])).toBe(1);
  expect(trie.match([1, 2, 3, 7, 8])).toBe(5);
});

test('an eviction mark below the capacity evicts down to it in one round', () => {
  const trie = new TokenTrie({ capacity: 8, evictTo: 4 });
  trie.insert([1, 2, 3, 4]);
  trie.insert([5, 6, 7, 8]);
  expect(trie.evicted).toBe(0);
  trie.insert([9]);
  expect(trie.size).toBe(4);
  expect(trie.evicted).toBe(5);
  // Oldest first: all of [1, 2, 3, 4] and the leaf 8 went, the newest insert stayed.
  expect(trie.match([1])).toBe(0);
  expect(trie.match([5, 6, 7, 8])).toBe(3);
  expect(trie.match([9])).toBe(1);
});

test('a capacity that is not a positive integer is refused', () => {
  expect(() => new TokenTrie({ capacity: 0 })).toThrow('capacity must be a positive integer, got 0');
});
