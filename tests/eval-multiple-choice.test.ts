import { describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO } from '../src/shared/paths.ts';
import { detectDatasetFormat, parseEvalDataset, readEvalDataset } from '../src/tools/eval/eval-dataset.ts';
import { buildChoicePrompt, extractAnswer, toQuestion, type MultipleChoiceQuestion } from '../src/tools/eval/multiple-choice.ts';
import { COMMONSENSEQA_50, flatten, nestedRows, toJsonl } from './helpers/eval-commonsenseqa.ts';

const rows = await nestedRows(3);
const nested = rows.map((r, i) => toQuestion(r, `nested:${i + 1}`));
const flat = rows.map((r, i) => toQuestion(flatten(r), `flat:${i + 1}`));
const program = nested[0]!; // A get mad, B compile, C debug, D write code, E get frustrated; answer E

describe('CommonsenseQA records', () => {
  test('the nested and the flattened layout give the same questions', () => {
    expect(flat).toEqual(nested);
    expect(program).toEqual({
      id: 'ef3d5d35128678937c36438466e0fc93',
      stem: 'The program kept getting errors, the amateur end user began to what?',
      concept: 'program',
      choices: [
        { label: 'A', text: 'get mad' },
        { label: 'B', text: 'compile' },
        { label: 'C', text: 'debug' },
        { label: 'D', text: 'write code' },
        { label: 'E', text: 'get frustrated' },
      ],
      answerKey: 'E',
    });
  });

  test('the prompt lists the choices on one line and ends with "Answer:"', () => {
    expect(buildChoicePrompt(program)).toBe(
      'Question: The program kept getting errors, the amateur end user began to what?\n' +
        'Choices: A. get mad B. compile C. debug D. write code E. get frustrated\n' +
        'Answer:',
    );
    expect(buildChoicePrompt(flat[2]!)).toBe(
      'Question: He was good at traditional science but excelled at social science, his favorite subject was what?\n' +
        'Choices: A. geography B. history studies C. math D. religion E. dancing\n' +
        'Answer:',
    );
  });

  test('records that cannot be scored are refused with their place', () => {
    const row = flatten(rows[0]!);
    expect(() => toQuestion({ ...row, answerKey: 'F' }, 'x.jsonl:7')).toThrow('x.jsonl:7: answerKey "F" is not one of the labels A, B, C, D, E');
    expect(() => toQuestion({ ...row, answerKey: '' }, 'x.jsonl:1')).toThrow('unlabelled test splits cannot be scored');
    expect(() => toQuestion({ ...row, choices: { label: ['A', 'B'], text: ['x'] } }, 'x.jsonl:2')).toThrow('2 labels but 1 texts');
    expect(() => toQuestion({ ...row, choices: { label: ['A', 'A'], text: ['x', 'y'] } }, 'x.jsonl:3')).toThrow('choice labels repeat');
    expect(() => toQuestion({ text: 'hello' }, 'x.jsonl:4')).toThrow('not a CommonsenseQA record');
  });
});

describe('answer extraction', () => {
  const answer = (output: string, q: MultipleChoiceQuestion = program) => extractAnswer(output, q.choices);

  test('a choice written as its letter', () => {
    expect(answer(' E')).toBe('E');
    expect(answer(' B. compile')).toBe('B');
    expect(answer(' (C)')).toBe('C');
    expect(answer('D) write code')).toBe('D');
    expect(answer(' The answer is A.')).toBe('A');
  });

  test('a choice written as its text, in any case and spacing', () => {
    expect(answer(' get frustrated')).toBe('E');
    expect(answer(' They would GET FRUSTRATED with it')).toBe('E');
    expect(answer(' write\n  code')).toBe('D');
    expect(answer(' debug.', flat[0])).toBe('C');
    expect(answer(' history studies', flat[2])).toBe('B');
  });

  test('the earliest match wins; at the same place the longer one', () => {
    expect(answer(' compile, or maybe E')).toBe('B');
    expect(answer(' E, not compile')).toBe('E');
    const q: MultipleChoiceQuestion = {
      ...program,
      choices: [
        { label: 'A', text: 'A lot' },
        { label: 'B', text: 'little' },
      ],
    };
    expect(answer('A lot of it', q)).toBe('A');
    const overlap: MultipleChoiceQuestion = {
      ...program,
      choices: [
        { label: 'A', text: 'mad' },
        { label: 'B', text: 'get mad' },
      ],
    };
    expect(answer(' get mad', overlap)).toBe('B');
  });

  test('no answer: nothing names a choice', () => {
    expect(answer('')).toBeNull();
    expect(answer(' Lily was very happy.')).toBeNull();
    // A lower-case "a" is the article, and letters inside words do not count.
    expect(answer(' a big dog')).toBeNull();
    expect(answer(' Andy and Emma')).toBeNull();
    expect(answer(' He compiled it')).toBeNull();
    expect(answer(' E2 is not a label')).toBeNull();
  });
});

describe('format detection', () => {
  test('nested, flattened, text; an unknown JSONL shape is refused', () => {
    expect(detectDatasetFormat(toJsonl(rows))).toBe('commonsenseqa-nested');
    expect(detectDatasetFormat(`\n${toJsonl(rows.map(flatten))}`)).toBe('commonsenseqa-flat');
    expect(detectDatasetFormat('Once upon a time.\n\nThe end.')).toBe('text');
    expect(detectDatasetFormat('{ not json at all }\n\nmore')).toBe('text');
    expect(() => detectDatasetFormat('{"prompt": "x", "answer": "y"}\n')).toThrow('are not a known format');
  });

  test('the shared files', () => {
    const questions = readEvalDataset(COMMONSENSEQA_50);
    expect(questions.kind).toBe('multiple-choice');
    expect(questions.format).toBe('commonsenseqa-nested');
    expect(questions.kind === 'multiple-choice' && questions.questions.length).toBe(50);
    const stories = readEvalDataset(DEMO.tinyStories);
    expect(stories.format).toBe('text');
    expect(stories.kind === 'text' && stories.paragraphs.length).toBe(1230);
  });

  test('a flattened file converted from the nested one reads back as the same questions', () => {
    const dir = mkdtempSync(join(tmpdir(), 'eval-csqa-'));
    try {
      const file = join(dir, 'flat.jsonl');
      writeFileSync(file, toJsonl(rows.map(flatten)));
      const data = readEvalDataset(file);
      expect(data.format).toBe('commonsenseqa-flat');
      expect(data.kind === 'multiple-choice' && data.questions).toEqual(nested);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a bad line is reported with its line number', () => {
    const lines = `${JSON.stringify(rows[0])}\n${JSON.stringify({ ...rows[1]!, answerKey: 'Z' })}\n`;
    expect(() => parseEvalDataset(lines, 'q.jsonl')).toThrow('q.jsonl:2: answerKey "Z"');
    expect(() => parseEvalDataset(`${JSON.stringify(rows[0])}\n{oops\n`, 'q.jsonl')).toThrow('q.jsonl:2: not valid JSON');
  });
});
