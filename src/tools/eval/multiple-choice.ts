/**
 * Multiple-choice questions (CommonsenseQA): one internal shape for both JSONL layouts, the prompt the
 * model answers, and how an answer is read back out of generated text.
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
 * longer one wins. Nothing found: no answer (`null`), which is counted apart from a wrong answer.
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

/** The prompt for one question (see the module comment). */
export function buildChoicePrompt(question: MultipleChoiceQuestion): string {
  const choices = question.choices.map((c) => `${c.label}. ${c.text}`).join(' ');
  return `Question: ${question.stem}\nChoices: ${choices}\nAnswer:`;
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
