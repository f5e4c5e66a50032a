/**
 * Router labels, the CITER shortcut way (no rollouts): 1 = keep the edge token, 0 = route it.
 *
 * - the edge model's top-1 is the true next token → 1 (the edge is right; routing only costs time);
 * - otherwise the cloud model's top-1 is right → 0 (routing fixes the token);
 * - both wrong → 1: under this criterion a route cannot fix the token, it only adds a round trip.
 *   See docs/router-training.md.
 */
import type { TeacherForced } from './teacher-forcing.ts';

export const LABEL_RULE = 'citer-shortcut: 1 (keep) if slm top-1 correct or both wrong; 0 (route) if only llm top-1 correct';

export function citerLabel(slmCorrect: boolean, llmCorrect: boolean): 0 | 1 {
  return !slmCorrect && llmCorrect ? 0 : 1;
}

export function citerLabels(forced: Pick<TeacherForced, 'count' | 'slmCorrect' | 'llmCorrect'>): Uint8Array {
  const labels = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) labels[i] = citerLabel(forced.slmCorrect[i] === 1, forced.llmCorrect[i] === 1);
  return labels;
}
