/** One flag reader for every tool: numbers and integers written as text are read with the edge's strict grammar. */
import { expect, test } from 'bun:test';
import { parseDecimal } from '../src/shared/number-text.ts';
import { integerFlag, numberFlag, UsageError } from '../src/tools/cli-support.ts';

test('decimal text: what an HTML number input writes, nothing looser', () => {
  expect(['0.7', '8', '-1', '.5', '1e3', '2.5E-2'].map(parseDecimal)).toEqual([0.7, 8, -1, 0.5, 1000, 0.025]);
  expect(['0x10', ' 8 ', '', '+1', 'Infinity', 'NaN', '1,5', '1e999'].map(parseDecimal)).toEqual(Array(8).fill(undefined));
});

test('numberFlag and integerFlag refuse loose text with the flag named, and check ranges', () => {
  expect(numberFlag({ 'top-p': '0.9' }, 'top-p')).toBe(0.9);
  expect(numberFlag({}, 'top-p', 1)).toBe(1);
  expect(() => numberFlag({ 'top-p': '0x1' }, 'top-p')).toThrow(new UsageError('--top-p must be a number, got "0x1"'));
  expect(() => numberFlag({ 'train-fraction': '1.5' }, 'train-fraction', 0.8, [0, 1])).toThrow(new UsageError('--train-fraction must be in [0, 1], got 1.5'));
  expect(integerFlag({ seed: '42' }, 'seed')).toBe(42);
  for (const text of ['0x10', ' 8 ', '8.0', '1e3', '']) {
    expect(() => integerFlag({ seed: text }, 'seed')).toThrow(new UsageError(`--seed must be an integer, got ${JSON.stringify(text)}`));
  }
  expect(() => integerFlag({ steps: '0' }, 'steps', 1, [1, 100])).toThrow(new UsageError('--steps must be in [1, 100], got 0'));
});
