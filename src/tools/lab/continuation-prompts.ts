/**
 * Prompts to continue from text: the first tokens of paragraphs. The evaluation generates continuations
 * from them, and router training's on-policy rounds roll out from them.
 *
 * @example
 * const prompts = continuationPrompts({ edgeModel, tokenizer }, paragraphs, 8, 16); // up to 8 prompts of 16 tokens
 */
import type { EvalEdge } from './generation-runs.ts';

/** Prompts for the continuations: the first `prefixTokens` tokens of paragraphs long enough to continue. */
export function continuationPrompts(
  edge: Pick<EvalEdge, 'edgeModel' | 'tokenizer'>,
  paragraphs: readonly string[],
  count: number,
  prefixTokens: number,
): string[] {
  const prompts: string[] = [];
  for (const text of paragraphs) {
    if (prompts.length >= count) break;
    const ids = edge.tokenizer.encode(text, { addBos: false, parseSpecialTokens: false });
    if (ids.length < prefixTokens + 2) continue;
    const prompt = edge.tokenizer.decode(ids.slice(0, prefixTokens)).trim();
    if (prompt) prompts.push(prompt);
  }
  return prompts;
}
