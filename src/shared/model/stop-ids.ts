/**
 * The ids a generation ends at: the pack's end tokens and its tokenizer's (an export may name one the other
 * does not). The decoding loop stops at them, and every tool that reads generations as the loop writes them
 * (chat turns, rollouts' branches, the constraint's end) uses the same set.
 *
 * @example
 * const stops = generationStopIds(edgeModel.pack, tokenizer); // e.g. [2, 1]
 */
import type { ModelPack } from './model-pack.ts';

export function generationStopIds(pack: Pick<ModelPack, 'eosTokenIds'>, tokenizer: { readonly eosIds: readonly number[] }): number[] {
  return [...new Set([...pack.eosTokenIds, ...tokenizer.eosIds])];
}
