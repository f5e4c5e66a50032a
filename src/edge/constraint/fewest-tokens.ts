/**
 * The fewest tokens of a vocabulary that can write a given text: a lower bound on any output of a grammar
 * whose every output starts with that text. Used to refuse a request whose token limit no output of its
 * grammar fits (a schema whose required keys alone take more than `max_tokens`), never one that fits:
 * every way of writing the text with the vocabulary's tokens is counted, not only the tokenizer's own.
 *
 * @example
 * fewestTokens('{"name": "', false, tokenizer); // { text: '{"name": "', needed: 4 }
 */
import { byteLevelAlphabet, tokenByteString, utf8ByteString } from '../../shared/text/token-bytes.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

/** A vocabulary's tokens as byte strings (one character per byte), in a set and sorted, with the longest's length. */
interface ByteVocabulary {
  tokens: Set<string>;
  sorted: string[];
  longest: number;
}

const vocabularies = new WeakMap<TextTokenizer, ByteVocabulary>();

function byteVocabulary(tokenizer: TextTokenizer): ByteVocabulary {
  const known = vocabularies.get(tokenizer);
  if (known) return known;
  const byteLevel = byteLevelAlphabet();
  const tokens = new Set<string>();
  tokenizer.encodedVocabulary().forEach((token, id) => {
    if (token === '' || tokenizer.isSpecialId(id)) return;
    const bytes = tokenByteString(token, tokenizer.vocabularyKind, byteLevel);
    if (bytes) tokens.add(bytes);
  });
  const sorted = [...tokens].sort();
  const vocabulary = { tokens, sorted, longest: Math.max(...sorted.map((t) => t.length)) };
  vocabularies.set(tokenizer, vocabulary);
  return vocabulary;
}

/** Whether some token starts with `text` and is longer. */
function extendedBySome(text: string, sorted: readonly string[]): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! <= text) lo = mid + 1;
    else hi = mid;
  }
  return lo < sorted.length && sorted[lo]!.startsWith(text);
}

/**
 * The fewest tokens any output starting with `text` takes: `text` covered by tokens, whose last may run
 * past it; one more when the output cannot end right after `text` and no token ran past.
 */
export function fewestTokens(text: string, endsAfter: boolean, tokenizer: TextTokenizer): { text: string; needed: number } {
  if (text === '') return { text, needed: endsAfter ? 0 : 1 };
  const { tokens, sorted, longest } = byteVocabulary(tokenizer);
  const bytes = utf8ByteString(text);
  const n = bytes.length;
  const best = new Array<number>(n + 1).fill(Infinity);
  best[0] = 0;
  let needed = Infinity;
  for (let i = 0; i < n; i++) {
    if (best[i] === Infinity) continue;
    for (let l = 1; l <= Math.min(longest, n - i); l++) {
      if (tokens.has(bytes.slice(i, i + l))) best[i + l] = Math.min(best[i + l]!, best[i]! + 1);
    }
    if (extendedBySome(bytes.slice(i), sorted)) needed = Math.min(needed, best[i]! + 1);
  }
  needed = Math.min(needed, best[n]! + (endsAfter ? 0 : 1));
  return { text, needed: Number.isFinite(needed) ? needed : 0 };
}
