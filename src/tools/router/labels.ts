/**
 * Router labels: 1 = keep the edge token, 0 = route it. Two rules.
 *
 * CITER's shortcut (no rollouts), against the true next token of human text:
 * - the edge model's top-1 is the true next token → 1 (the edge is right; routing only costs time);
 * - otherwise the cloud model's top-1 is right → 0 (routing fixes the token);
 * - both wrong → 1: under this criterion a route cannot fix the token, it only adds a round trip.
 *
 * Divergence (the default; R2R-like, with the cloud as the reference instead of the text): route where
 * the cloud finds the edge's top-1 less than half as likely as its own top-1. It needs no true next
 * token, so it labels the system's own generated trajectories too (on-policy rounds), and it keeps near
 * ties on the edge, where the cloud itself is unsure and a route buys little. See docs/router-training.md.
 *
 * @example
 * divergenceLabel(0.05, 0.6); // 0: the cloud would rather say something else
 */
import type { TeacherForced } from './teacher-forcing.ts';

export const LABEL_RULES = ['divergence', 'citer'] as const;
export type LabelRule = (typeof LABEL_RULES)[number];

/** Route when p_cloud(edge top-1) < DIVERGENCE_RATIO · p_cloud(cloud top-1). */
export const DIVERGENCE_RATIO = 0.5;

export const LABEL_RULE_TEXT: Record<LabelRule, string> = {
  citer: 'citer-shortcut: 1 (keep) if slm top-1 correct or both wrong; 0 (route) if only llm top-1 correct',
  divergence: `divergence: 0 (route) if p_llm(slm top-1) < ${DIVERGENCE_RATIO} * p_llm(llm top-1), else 1 (keep)`,
};

/** The CITER rule's text, as router.json has recorded it since the first trainer. */
export const LABEL_RULE = LABEL_RULE_TEXT.citer;

export function citerLabel(slmCorrect: boolean, llmCorrect: boolean): 0 | 1 {
  return !slmCorrect && llmCorrect ? 0 : 1;
}

export function divergenceLabel(llmProbOfSlmTop1: number, llmTopProb: number): 0 | 1 {
  return llmProbOfSlmTop1 < DIVERGENCE_RATIO * llmTopProb ? 0 : 1;
}

export function citerLabels(forced: Pick<TeacherForced, 'count' | 'slmCorrect' | 'llmCorrect'>): Uint8Array {
  const labels = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) labels[i] = citerLabel(forced.slmCorrect[i] === 1, forced.llmCorrect[i] === 1);
  return labels;
}

export function divergenceLabels(forced: Pick<TeacherForced, 'count' | 'llmProbOfSlmTop1' | 'llmTopProb'>): Uint8Array {
  const labels = new Uint8Array(forced.count);
  for (let i = 0; i < forced.count; i++) labels[i] = divergenceLabel(forced.llmProbOfSlmTop1[i]!, forced.llmTopProb[i]!);
  return labels;
}

export function labelsBy(rule: LabelRule, forced: TeacherForced): Uint8Array {
  return rule === 'citer' ? citerLabels(forced) : divergenceLabels(forced);
}
