/**
 * The one vocabulary-id test, and the boundary it guards: a cloud reply whose ids are not the edge's is refused
 * in words, whatever the kind of wrong value.
 */
import { expect, test } from 'bun:test';
import { checkCloudReply } from '../src/edge/loop/cloud-reply-check.ts';
import { isVocabularyId } from '../src/shared/model/vocabulary-id.ts';

test.each([
  [0, true],
  [511, true],
  [512, false],
  [-1, false],
  [1.5, false],
  [Number.NaN, false],
  ['3', false],
  [null, false],
])('isVocabularyId(%p, 512) is %p', (id, expected) => {
  expect(isVocabularyId(id, 512)).toBe(expected);
});

test('a reply is checked id by id against the edge vocabulary', () => {
  expect(checkCloudReply([5, 9], 4, 512)).toEqual({ ids: [5, 9] });
  expect(checkCloudReply([5, 512], 4, 512)).toEqual({ problem: 'the cloud returned token id 512, outside the edge vocabulary [0, 512)' });
  expect(checkCloudReply([2.5], 4, 512)).toEqual({ problem: 'the cloud returned token id 2.5, outside the edge vocabulary [0, 512)' });
  expect(checkCloudReply([], 4, 512)).toEqual({ problem: 'the cloud returned no tokens' });
  expect(checkCloudReply([1, 2, 3], 2, 512)).toEqual({ problem: 'the cloud returned 3 tokens for a step of at most 2' });
});
