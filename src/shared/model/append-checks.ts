/**
 * What an append must satisfy before any work is queued or run: at least one token, every id in the
 * vocabulary, and room in the context window.
 *
 * @example
 * checkAppend(pack, sequence.length, [1, 2, 3]); // throws INVALID_ARGUMENT or OUT_OF_RANGE, else nothing
 */
import { AppError } from '../errors.ts';
import type { ModelPack } from './model-pack.ts';
import { isVocabularyId } from './vocabulary-id.ts';

export function checkAppend(pack: Pick<ModelPack, 'vocabSize' | 'maxPositions'>, cached: number, tokens: readonly number[]): void {
  const { vocabSize, maxPositions } = pack;
  if (tokens.length === 0) throw new AppError('INVALID_ARGUMENT', 'append needs at least one token');
  for (const t of tokens) {
    if (!isVocabularyId(t, vocabSize)) throw new AppError('INVALID_ARGUMENT', `token id ${t} is outside the vocabulary [0, ${vocabSize})`);
  }
  if (cached + tokens.length > maxPositions) {
    throw new AppError('OUT_OF_RANGE', `context window exceeded: ${cached} tokens in cache + ${tokens.length} new > ${maxPositions} (model limit)`);
  }
}
