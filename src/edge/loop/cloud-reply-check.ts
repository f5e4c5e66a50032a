/** The check a routed step's reply passes before the loop uses its ids. */
import { AppError } from '../../shared/errors.ts';
import type { CloudStepReply } from '../cloud/cloud-client.ts';

/**
 * The ids of a cloud reply, checked before the edge uses them: between 1 and `maxTokens` of them, each an
 * integer id of the edge's vocabulary. Throws (and the loop falls back to the edge model) otherwise: a
 * broken or mismatched cloud must cost a routed token, never the generation, whose edge KV cache would
 * refuse the ids.
 */
export function checkCloudReply(reply: CloudStepReply, maxTokens: number, vocabSize: number): number[] {
  const ids: unknown = reply?.tokens;
  if (!Array.isArray(ids) || ids.length === 0) throw new AppError('INTERNAL', 'the cloud returned no tokens');
  if (ids.length > maxTokens) throw new AppError('INTERNAL', `the cloud returned ${ids.length} tokens for a step of at most ${maxTokens}`);
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new AppError('INTERNAL', `the cloud returned token id ${String(id)}, outside the edge vocabulary [0, ${vocabSize})`);
    }
  }
  return ids as number[];
}
