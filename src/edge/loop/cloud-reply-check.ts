/** The check a routed step's served tokens pass before the loop uses them. */
import { isVocabularyId } from '../../shared/model/vocabulary-id.ts';

/**
 * The ids of a served reply, checked before the edge uses them: between 1 and `maxTokens` of them, each an
 * integer id of the edge's vocabulary. Otherwise the problem in words (and the loop falls back to the edge
 * model): a broken or mismatched cloud must cost a routed token, never the generation, whose edge KV cache
 * would refuse the ids.
 *
 * @example
 * checkCloudReply([5, 9], 4, 512);  // { ids: [5, 9] }
 * checkCloudReply([], 4, 512);      // { problem: 'the cloud returned no tokens' }
 */
export function checkCloudReply(tokens: unknown, maxTokens: number, vocabSize: number): { ids: number[] } | { problem: string } {
  if (!Array.isArray(tokens) || tokens.length === 0) return { problem: 'the cloud returned no tokens' };
  if (tokens.length > maxTokens) return { problem: `the cloud returned ${tokens.length} tokens for a step of at most ${maxTokens}` };
  for (const id of tokens) {
    if (!isVocabularyId(id, vocabSize)) {
      return { problem: `the cloud returned token id ${String(id)}, outside the edge vocabulary [0, ${vocabSize})` };
    }
  }
  return { ids: tokens as number[] };
}
