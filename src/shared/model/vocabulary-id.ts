/**
 * The one test of a token id against a vocabulary: an integer in [0, vocabSize). Ids that cross a boundary (a
 * cloud's reply, its alternatives, a caller's prompt ids) are held to it before anything indexes a logit row or
 * a KV cache with them.
 *
 * @example
 * isVocabularyId(511, 512); // true
 * isVocabularyId(512, 512); // false
 * isVocabularyId(1.5, 512); // false
 */
export function isVocabularyId(id: unknown, vocabSize: number): id is number {
  return Number.isInteger(id) && (id as number) >= 0 && (id as number) < vocabSize;
}
