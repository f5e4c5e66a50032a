/**
 * Multiple-choice questions (CommonsenseQA): one internal shape for both JSONL layouts, the prompt the
 * model answers, and how an answer is read back out of generated text. A pack with a chat template is
 * asked through it instead (choice-eval.ts): one user message, the same question and choices lines and
 * an instruction to answer with the letter (`buildChoiceMessage`), answered in the assistant's turn.
 *
 * Prompt (one line per part, no trailing space; the model continues after "Answer:"):
 *
 *     Question: The program kept getting errors, the amateur end user began to what?
 *     Choices: A. get mad B. compile C. debug D. write code E. get frustrated
 *     Answer:
 *
 * Answer extraction: the earliest of (a) a standalone choice label, written exactly as the label (upper
 * case: a lower-case "a" is the English article, not choice A), not touching another letter or digit
 * ("B", "(B)", "B." and "B)" all count), and (b) the text of a choice, case-insensitive, on word
 * boundaries, any run of white space matching any other. When two matches start at the same place the
 * longer one wins. Nothing found: no answer (`null`), which is counted apart from a wrong answer. From
 * a chat model's reply (`extractChatAnswer`): the first standalone label after any `<think>` block, since
 * it was asked for the letter and may explain itself after it.
 *
 * @example
 * extractAnswer(' B. compile', question.choices); // 'B'
 * extractAnswer(' I think they got Frustrated', question.choices); // 'E'
 */
import { AppError } from '../../shared/errors.ts';
import { isRecord } from '../../shared/is-record.ts';

export interface Choice {
  label: string;
  text: string;
}

export interface MultipleChoiceQuestion {
  id: string;
  stem: string;
  concept?: string;
  choices: Choice[];
  answerKey: string;
}

/** The two JSONL layouts CommonsenseQA is distributed in. */
export type ChoiceFormat = 'commonsenseqa-nested' | 'commonsenseqa-flat';

/**
 * Which layout a parsed JSONL record has, or undefined for neither.
 * Nested (the original release): `{answerKey, id, question: {question_concept, choices: [{label, text}], stem}}`.
 * Flat (the Hugging Face datasets layout): `{id, question, question_concept, choices: {label: [...], text: [...]}, answerKey}`.
 */
export function choiceFormatOf(record: unknown): ChoiceFormat | undefined {
  if (!isRecord(record)) return undefined;
  const q = record.question;
  if (isRecord(q) && typeof q.stem === 'string' && Array.isArray(q.choices)) return 'commonsenseqa-nested';
  if (typeof q === 'string' && isRecord(record.choices) && Array.isArray(record.choices.label) && Array.isArray(record.choices.text)) {
    return 'commonsenseqa-flat';
  }
  return undefined;
}

/** One record in either layout → a validated question; `where` names it in errors (e.g. `file.jsonl:3`). */
export function toQuestion(record: unknown, where: string): MultipleChoiceQuestion {
  const bad = (message: string): never => {
    throw new AppError('INVALID_ARGUMENT', `${where}: ${message}`);
  };
  const format = choiceFormatOf(record);
  if (!format || !isRecord(record)) return bad('not a CommonsenseQA record (neither the nested nor the flattened layout)');
  let stem: unknown;
  let concept: unknown;
  let choices: Choice[];
  if (format === 'commonsenseqa-nested') {
    const q = record.question as Record<string, unknown>;
    stem = q.stem;
    concept = q.question_concept;
    choices = (q.choices as unknown[]).map((c) => (isRecord(c) ? { label: c.label, text: c.text } : { label: undefined, text: undefined })) as Choice[];
  } else {
    stem = record.question;
    concept = record.question_concept;
    const { label, text } = record.choices as { label: unknown[]; text: unknown[] };
    if (label.length !== text.length) bad(`choices has ${label.length} labels but ${text.length} texts`);
    choices = label.map((l, i) => ({ label: l, text: text[i] })) as Choice[];
  }
  if (typeof stem !== 'string' || stem.trim() === '') bad('the question text is missing');
  if (choices.length < 2) bad(`a question needs at least 2 choices, got ${choices.length}`);
  for (const c of choices) {
    if (typeof c.label !== 'string' || c.label.trim() === '' || typeof c.text !== 'string' || c.text.trim() === '') {
      bad('every choice needs a non-empty label and text');
    }
  }
  const labels = choices.map((c) => c.label);
  if (new Set(labels).size !== labels.length) bad(`choice labels repeat: ${labels.join(', ')}`);
  const answerKey = record.answerKey;
  if (typeof answerKey !== 'string' || !labels.includes(answerKey)) {
    bad(`answerKey ${JSON.stringify(answerKey)} is not one of the labels ${labels.join(', ')} (unlabelled test splits cannot be scored)`);
  }
  return {
    id: typeof record.id === 'string' ? record.id : where,
    stem: (stem as string).trim(),
    ...(typeof concept === 'string' ? { concept } : {}),
    choices: choices.map((c) => ({ label: c.label.trim(), text: c.text.trim() })),
    answerKey: answerKey as string,
  };
}

/** The question and its choices, one line each: how both prompts start. */
function questionLines(question: MultipleChoiceQuestion): string {
  const choices = question.choices.map((c) => `${c.label}. ${c.text}`).join(' ');
  return `Question: ${question.stem}\nChoices: ${choices}`;
}

/** The prompt for one question (see the module comment). */
export function buildChoicePrompt(question: MultipleChoiceQuestion): string {
  return `${questionLines(question)}\nAnswer:`;
}

/**
 * The user message that asks a chat model one question: the prompt's question and choices lines, then
 * an instruction to answer with the letter.
 *
 * @example
 * buildChoiceMessage(question);
 * // 'Question: ...\nChoices: A. get mad B. compile ...\nAnswer with the letter of the correct choice (A, B, C, D or E).'
 */
export function buildChoiceMessage(question: MultipleChoiceQuestion): string {
  const labels = question.choices.map((c) => c.label);
  return `${questionLines(question)}\nAnswer with the letter of the correct choice (${labels.slice(0, -1).join(', ')} or ${labels.at(-1)}).`;
}

/** Generation stops at the end of the answer line. */
export const CHOICE_STOP = ['\n'];

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Not preceded / followed by a letter or digit (any script). */
const standalone = (pattern: string, flags: string) => new RegExp(`(?<![\\p{L}\\p{N}])(?:${pattern})(?![\\p{L}\\p{N}])`, `u${flags}`);

/** The label of the answer `output` gives (see the module comment), or null for no answer. */
export function extractAnswer(output: string, choices: readonly Choice[]): string | null {
  let best: { index: number; length: number; label: string } | undefined;
  const consider = (regex: RegExp, label: string) => {
    const m = regex.exec(output);
    if (!m) return;
    if (!best || m.index < best.index || (m.index === best.index && m[0].length > best.length)) {
      best = { index: m.index, length: m[0].length, label };
    }
  };
  for (const c of choices) {
    consider(standalone(escapeRegExp(c.label), ''), c.label);
    const words = c.text.split(/\s+/).filter(Boolean).map(escapeRegExp);
    if (words.length) consider(standalone(words.join('\\s+'), 'i'), c.label);
  }
  return best?.label ?? null;
}

/** A chat model's reply without its reasoning: the text after a closed `<think>` block; none while one is open. */
function replyText(output: string): string {
  const closed = output.lastIndexOf('</think>');
  const reply = closed >= 0 ? output.slice(closed + '</think>'.length) : output;
  const open = reply.indexOf('<think>');
  return open >= 0 ? reply.slice(0, open) : reply;
}

/** The label a chat model's reply names first, standalone (see the module comment), or null for no answer. */
export function extractChatAnswer(output: string, choices: readonly Choice[]): string | null {
  const reply = replyText(output);
  let best: { index: number; label: string } | undefined;
  for (const c of choices) {
    const m = standalone(escapeRegExp(c.label), '').exec(reply);
    if (m && (!best || m.index < best.index)) best = { index: m.index, label: c.label };
  }
  return best?.label ?? null;
}
