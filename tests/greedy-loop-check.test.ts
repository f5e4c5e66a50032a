/**
 * The loop check's reading of why a router's greedy output loops: of its loop steps (the ids rep4 counts),
 * those both models' top-1 would have taken, where keeping or routing the token changed nothing.
 */
import { expect, test } from 'bun:test';
import { rep4 } from '../src/tools/lab/free-running-metrics.ts';
import { sharedLoopSteps } from '../src/tools/router/greedy-loop-check.ts';

// 1 2 3 4 1 2 3 4 5: the second (1 2 3 4) ends at index 7, the one loop step.
const generated = [1, 2, 3, 4, 1, 2, 3, 4, 5];

test('the loop steps are the ids rep4 counts', () => {
  const none = generated.map(() => 0);
  expect(sharedLoopSteps(generated, none, none).steps).toBe(rep4(generated).repeated);
  expect(sharedLoopSteps(generated, none, none).steps).toBe(1);
  expect(sharedLoopSteps([7, 7, 7, 7, 7, 7], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]).steps).toBe(rep4([7, 7, 7, 7, 7, 7]).repeated);
});

test('a loop step is shared where both top-1s would end a seen 4-gram, and only loop steps count', () => {
  const tops = (at7: number) => generated.map((_, t) => (t === 7 ? at7 : t === 8 ? 1 : 0));
  // At 7 both models would write 4: (1 2 3 4) again, whichever wrote it.
  expect(sharedLoopSteps(generated, tops(4), tops(4))).toEqual({ steps: 1, shared: 1 });
  // The cloud would have written 9 there: routing that step would have left the loop.
  expect(sharedLoopSteps(generated, tops(4), tops(9))).toEqual({ steps: 1, shared: 0 });
  expect(sharedLoopSteps(generated, tops(9), tops(4))).toEqual({ steps: 1, shared: 0 });
  // At 8 both would write 1, completing (2 3 4 1) seen before; but 5 was written there, not a loop step.
  expect(sharedLoopSteps(generated, tops(9), tops(9))).toEqual({ steps: 1, shared: 0 });
});

test('text without a repeated 4-gram has no loop steps', () => {
  expect(sharedLoopSteps([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6])).toEqual({ steps: 0, shared: 0 });
  expect(sharedLoopSteps([], [], [])).toEqual({ steps: 0, shared: 0 });
});
