/** CommonsenseQA rows for the evaluation tests: the first rows of the shared 50-sample file, and the same rows flattened. */
import { join } from 'node:path';
import { ASSETS_DIR } from '../../src/shared/paths.ts';

export const COMMONSENSEQA_50 = join(ASSETS_DIR, 'datasets', 'commonsenseqa', 'commonsenseqa_50_samples.jsonl');

export interface NestedRow {
  answerKey: string;
  id: string;
  question: { question_concept: string; choices: { label: string; text: string }[]; stem: string };
}

export async function nestedRows(count: number): Promise<NestedRow[]> {
  const lines = (await Bun.file(COMMONSENSEQA_50).text()).split('\n').filter((l) => l.trim() !== '');
  return lines.slice(0, count).map((l) => JSON.parse(l) as NestedRow);
}

/** The Hugging Face datasets layout of the same row. */
export function flatten(row: NestedRow) {
  return {
    id: row.id,
    question: row.question.stem,
    question_concept: row.question.question_concept,
    choices: { label: row.question.choices.map((c) => c.label), text: row.question.choices.map((c) => c.text) },
    answerKey: row.answerKey,
  };
}

export const toJsonl = (rows: unknown[]) => `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;
