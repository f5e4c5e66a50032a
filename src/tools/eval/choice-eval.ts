/**
 * The threshold sweep on multiple-choice questions: every question's prompt (see multiple-choice.ts)
 * is answered by a real generation through the decoding loop at τ; the answer is read out of the
 * generated text. When the edge pack's tokenizer has a chat template, each question is one user message
 * rendered through it with the generation prompt (its ids fed as they are, special tokens the template's,
 * as the edge's chat endpoint feeds them), the generation ends with the assistant's turn (the loop stops
 * at the end-of-turn token, an EOS id) and the answer is the reply's first standalone letter; otherwise
 * the plain prompt ends at the end of the answer line. Quality is accuracy over all questions (no answer counts as wrong, and is reported on
 * its own too). The baselines answer the same prompts with a random router at p = the router's routed
 * share, and with the edge model's top-1 probability at the threshold whose runs route the share
 * closest to it.
 *
 * With `constrainAnswer` (--constrain-answer) each answer is held to one of the question's labels by a
 * `choice` constraint (constraint/), on the edge's tokens and the routed ones alike: the exact-match setting,
 * where the output is the letter and nothing else (after "Answer:" the letter with its leading space, as the
 * line is written). Accuracy is then exact match, and no output can be "no answer".
 */
import { chatTemplateOption } from '../../edge/chat/edge-chat.ts';
import type { RawConstraint } from '../../edge/constraint/constraint-spec.ts';
import type { Router } from '../../edge/routing/router.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { ProbeRouter, RandomRouter, TopProbabilityRouter } from '../lab/baseline-routers.ts';
import { ChatTemplate } from '../../shared/text/chat-template.ts';
import { generateAll, type EvalEdge, type GenerationRun, type Prompt } from '../lab/generation-runs.ts';
import {
  buildChoiceMessage,
  buildChoicePrompt,
  CHOICE_STOP,
  extractAnswer,
  extractChatAnswer,
  type Choice,
  type MultipleChoiceQuestion,
} from './multiple-choice.ts';
import { matchRoutedRatio, quantileThreshold } from '../lab/ratio-matching.ts';

export interface ChoiceEvalOptions {
  edge: EvalEdge;
  router: Router;
  questions: readonly MultipleChoiceQuestion[];
  thresholds: readonly number[];
  seed: number;
  maxNewTokens: number;
  calibrationRuns: number;
  tolerance: number;
  progress?: ProgressReporter;
  /** The edge's --chat-template (a Jinja file, or `chatml`); the pack's own template when absent. */
  chatTemplate?: string;
  /** Hold each answer to the question's labels (see the module comment). */
  constrainAnswer?: boolean;
}

export interface ChoicePoint {
  threshold: number;
  /** Routed tokens / generated tokens over all questions. */
  routedRatio: number;
  /** Accuracy: right answers / questions. */
  quality: number;
  /** Share of questions whose output names no choice. */
  noAnswerRate: number;
  tokens: number;
  /** Tokens the cloud chose: `routedRatio` is routed / tokens. */
  routed: number;
  /** With --constrain-answer: routed letters the constraint replaced by an allowed one of the cloud's top-k, and fallbacks to the edge's. */
  cloudTokensReplaced?: number;
  constrainedFallbacks?: number;
}

export interface ChoiceBaselinePoint extends ChoicePoint {
  /** The routing probability (random) or top-1 threshold that matched the router's routed share. */
  baselineThreshold: number;
  calibrationRuns: number;
}

export interface ChoiceExample {
  threshold: number;
  id: string;
  output: string;
  extracted: string | null;
  answerKey: string;
}

/** How the questions were asked: the plain prompt, or a user message through the edge pack's chat template. */
export type ChoicePromptFormat = 'plain' | 'chat-template';

export interface ChoiceEvalResult {
  kind: 'multiple-choice';
  qualityMetric: 'accuracy';
  promptFormat: ChoicePromptFormat;
  questions: number;
  /** Expected accuracy of guessing uniformly among each question's choices. */
  chanceAccuracy: number;
  maxNewTokens: number;
  /** How answers were held: `choice` (one of the labels, exactly; --constrain-answer), or `none` (free text, read out). */
  answerConstraint: 'choice' | 'none';
  /** Each question's right label, in order: with a router point's `answers`, its accuracy is recomputed. */
  answerKeys: string[];
  /** The router's points, each with the label it read from every question's output (null: no answer). */
  points: (ChoicePoint & { answers: (string | null)[] })[];
  baselines: { random: ChoiceBaselinePoint[]; top1: ChoiceBaselinePoint[] };
  /** The first few outputs at the lowest and highest threshold, to show what the model writes. */
  examples: ChoiceExample[];
}

type ScoredRun = GenerationRun & { accuracy: number; noAnswerRate: number; answers: (string | null)[] };
type Extract = (output: string, choices: readonly Choice[]) => string | null;

function score(run: GenerationRun, questions: readonly MultipleChoiceQuestion[], extract: Extract): ScoredRun {
  const answers = run.items.map((item, i) => extract(item.text, questions[i]!.choices));
  const right = answers.filter((a, i) => a === questions[i]!.answerKey).length;
  const none = answers.filter((a) => a === null).length;
  const n = Math.max(questions.length, 1);
  return { ...run, answers, accuracy: right / n, noAnswerRate: none / n };
}

const EXAMPLES = 3;

/** An output held to the labels is one of them, exactly (its leading space aside). */
const exactLabel: Extract = (output, choices) => choices.find((c) => c.label === output.trim())?.label ?? null;

/** How each question is asked and its answer read (see the module comment). */
export function choicePrompts(
  edge: Pick<EvalEdge, 'tokenizer'>,
  questions: readonly MultipleChoiceQuestion[],
  chatTemplate?: string,
  constrainAnswer = false,
): { format: ChoicePromptFormat; prompts: Prompt[]; stop: string[]; extract: Extract; constraints?: RawConstraint[] } {
  const template = chatTemplate === undefined ? ChatTemplate.ofTokenizer(edge.tokenizer) : chatTemplateOption(edge.tokenizer, chatTemplate);
  // The plain prompt's answer line reads "Answer: B": the label follows a space there; a chat reply starts with it.
  const held = (space: string) =>
    constrainAnswer ? { extract: exactLabel, constraints: questions.map((q) => ({ choice: q.choices.map((c) => `${space}${c.label}`) })) } : undefined;
  if (!template) return { format: 'plain', prompts: questions.map(buildChoicePrompt), stop: CHOICE_STOP, extract: extractAnswer, ...held(' ') };
  const prompts = questions.map((q) => template.encode([{ role: 'user', content: buildChoiceMessage(q) }], edge.tokenizer, { addGenerationPrompt: true }));
  return { format: 'chat-template', prompts, stop: [], extract: extractChatAnswer, ...held('') };
}

export async function evaluateChoices(o: ChoiceEvalOptions): Promise<ChoiceEvalResult> {
  const { edge, questions, progress } = o;
  const { format, prompts, stop, extract, constraints } = choicePrompts(edge, questions, o.chatTemplate, o.constrainAnswer);
  const settings = { maxNewTokens: o.maxNewTokens, stop, ...(constraints ? { constraints } : {}) };
  const measured = new Map<string, Promise<ScoredRun>>();
  const runWith = (key: string, router: () => Router, threshold: number) => {
    const id = `${key}@${threshold}`;
    let run = measured.get(id);
    if (!run) {
      run = generateAll(edge, router(), prompts, { ...settings, threshold }).then((r) => score(r, questions, extract));
      measured.set(id, run);
    }
    return run;
  };
  const point = (threshold: number, r: ScoredRun): ChoicePoint => ({
    threshold,
    routedRatio: r.routedRatio,
    quality: r.accuracy,
    noAnswerRate: r.noAnswerRate,
    tokens: r.tokens,
    routed: r.routed,
    ...(r.constraint ? { cloudTokensReplaced: r.constraint.cloudTokensReplaced, constrainedFallbacks: r.constraint.constrainedFallbacks } : {}),
  });

  const points: ChoiceEvalResult['points'] = [];
  const random: ChoiceBaselinePoint[] = [];
  const top1: ChoiceBaselinePoint[] = [];
  const examples: ChoiceExample[] = [];
  const ends = new Set([Math.min(...o.thresholds), Math.max(...o.thresholds)]);
  try {
    progress?.start('answering', o.thresholds.length);
    for (const [i, threshold] of o.thresholds.entries()) {
      progress?.update(i, `τ=${threshold} router`);
      const probe = new ProbeRouter(o.router);
      const run = score(await generateAll(edge, probe, prompts, { ...settings, threshold }), questions, extract);
      points.push({ ...point(threshold, run), answers: run.answers });
      if (ends.has(threshold)) {
        for (const [q, item] of run.items.slice(0, EXAMPLES).entries()) {
          examples.push({ threshold, id: questions[q]!.id, output: item.text, extracted: run.answers[q]!, answerKey: questions[q]!.answerKey });
        }
        ends.delete(threshold);
      }
      const target = run.routedRatio;

      progress?.update(i, `τ=${threshold} random`);
      const randomRun = await runWith('random', () => new RandomRouter(o.seed), target);
      random.push({ ...point(threshold, randomRun), baselineThreshold: target, calibrationRuns: 1 });

      progress?.update(i, `τ=${threshold} top-1`);
      const matched = await matchRoutedRatio((t) => runWith('top1', () => new TopProbabilityRouter(), t), target, {
        guess: quantileThreshold(probe.topProbabilities, target),
        maxRuns: o.calibrationRuns,
        tolerance: o.tolerance,
      });
      top1.push({ ...point(threshold, matched.result), baselineThreshold: matched.threshold, calibrationRuns: matched.runs });
      progress?.update(i + 1);
    }
  } finally {
    progress?.stop();
  }
  const chance = questions.reduce((s, q) => s + 1 / q.choices.length, 0) / Math.max(questions.length, 1);
  return {
    kind: 'multiple-choice',
    qualityMetric: 'accuracy',
    promptFormat: format,
    questions: questions.length,
    chanceAccuracy: chance,
    maxNewTokens: o.maxNewTokens,
    answerConstraint: constraints ? 'choice' : 'none',
    answerKeys: questions.map((q) => q.answerKey),
    points,
    baselines: { random, top1 },
    examples,
  };
}
