/** The router's extra features, the loop measures, the fixed-share table and the text splits: exact values on hand-made inputs. */
import { describe, expect, test } from 'bun:test';
import {
  extraFeatures,
  extraWidth,
  logitStats,
  completesSeenNgram,
  loopFeatures,
  RECENT_SPAN,
  repeatEnds,
  REPETITION_WINDOW,
  parseFeatureGroups,
  positionFeature,
  repetitionFeatures,
} from '../src/edge/routing/router-features.ts';
import { commonPrefix, freeRunningFigures, isStuck, rep4 } from '../src/tools/lab/free-running-metrics.ts';
import { cloudPerplexity } from '../src/tools/lab/generation-runs.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { atShare } from '../src/tools/lab/share-table.ts';
import { pickExtraColumns, routerInputs } from '../src/tools/lab/feature-matrix.ts';
import { divergenceLabel, divergenceLabels } from '../src/tools/router/labels.ts';
import { detectSplit, splitText } from '../src/tools/lab/text-corpus.ts';

describe('logit statistics', () => {
  test('two equal logits and one far below: entropy ln 2, top-1 1/2, margin 0', () => {
    const s = logitStats(Float32Array.of(0, 0, -1000));
    expect(s.entropy).toBeCloseTo(Math.LN2, 12);
    expect(s.top1).toBe(0.5);
    expect(s.margin).toBe(0);
    expect(s.argmax).toBe(0);
  });

  test('logits ln 3, 0: probabilities 3/4 and 1/4', () => {
    const s = logitStats(Float32Array.of(0, Math.log(3)));
    expect(s.argmax).toBe(1);
    expect(s.top1).toBeCloseTo(0.75, 6);
    expect(s.margin).toBeCloseTo(0.5, 6);
    expect(s.entropy).toBeCloseTo(-(0.75 * Math.log(0.75) + 0.25 * Math.log(0.25)), 6);
  });
});

describe('repetition features', () => {
  test('a token repeating the previous one in a loop', () => {
    // context … 7 7 7, proposing 7: repeats, bigram (7,7) seen, trigram (7,7,7) seen, last two equal.
    expect(repetitionFeatures([1, 2, 7, 7, 7], 7)).toEqual([1, 1, 1, 1, 3 / 5]);
  });

  test('a bigram seen before, not a trigram', () => {
    // (3, 4) occurred at positions 1–2; the trigram (9, 3, 4) did not.
    expect(repetitionFeatures([1, 3, 4, 5, 9, 3], 4)).toEqual([0, 1, 0, 0, 5 / 6]);
  });

  test('fresh text, and the empty context', () => {
    expect(repetitionFeatures([1, 2, 3], 4)).toEqual([0, 0, 0, 0, 1]);
    expect(repetitionFeatures([], 4)).toEqual([0, 0, 0, 0, 1]);
  });

  test('only the last 64 ids are read', () => {
    // (9, 6) opens the context; 63 fresh ids and a 9 later it has left the 64-id window.
    const fresh = Array.from({ length: 63 }, (_, i) => 100 + i);
    expect(repetitionFeatures([9, 6, ...fresh, 9], 6)[1]).toBe(0);
    expect(repetitionFeatures([9, 6, ...fresh.slice(2), 9], 6)[1]).toBe(1); // 64 ids: still inside
  });

  test('extra features follow the pack groups, logit statistics first', () => {
    const logits = Float32Array.of(0, Math.log(3));
    expect(extraWidth(['hidden'])).toBe(0);
    expect(extraWidth(['hidden', 'logit_stats', 'repetition'])).toBe(8);
    expect([...extraFeatures(['hidden', 'repetition'], logits, [1, 1])]).toEqual([1, 1, 0, 1, 0.5]);
    const both = extraFeatures(['hidden', 'logit_stats', 'repetition'], logits, [1, 1]);
    expect(both.length).toBe(8);
    expect(both[1]).toBeCloseTo(0.75, 6);
    expect([...both.slice(3)]).toEqual([1, 1, 0, 1, 0.5]);
  });

  test('loop: the proposed token completes a 4-gram seen before; the share of the last 16 ids that each completed one', () => {
    // (1, 2, 3, 4) then (1, 2, 3): proposing 4 completes the 4-gram; no id so far completed one.
    expect(loopFeatures([1, 2, 3, 4, 1, 2, 3], 4)).toEqual([1, 0]);
    // A trigram seen before is not enough.
    expect(loopFeatures([9, 2, 3, 4, 1, 2, 3], 4)).toEqual([0, 0]);
    // "5 6 7 8" three times: the second copy's last id and every id of the third complete a seen 4-gram (6 of 12).
    const loop = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8];
    expect(loopFeatures(loop, 5)).toEqual([1, 5 / 12]);
    // 20 fresh ids, then the loop: the share is over the last 16 only (5 of them repeat).
    expect(loopFeatures([...Array.from({ length: 20 }, (_, i) => 100 + i), ...loop], 9)).toEqual([0, 5 / 16]);
    expect(loopFeatures([], 4)).toEqual([0, 0]);
    // The share is that of repeatEnds: each of the last ids, checked against the window's ids before it alone.
    const random = seededRandom(7);
    for (let trial = 0; trial < 200; trial++) {
      const context = Array.from({ length: Math.floor(random() * 90) }, () => Math.floor(random() * 3));
      const recent = context.slice(Math.max(0, context.length - REPETITION_WINDOW));
      const span = Math.min(RECENT_SPAN, recent.length);
      let repeats = 0;
      for (let k = recent.length - span; k < recent.length; k++) if (completesSeenNgram(recent.slice(0, k), recent[k]!, 4)) repeats++;
      expect(loopFeatures(context, 1)[1]).toBe(span === 0 ? 0 : repeats / span);
    }
    // The group's two values come after the position's, in the fixed group order.
    const logits = Float32Array.of(0, Math.log(3));
    expect(extraWidth(['hidden', 'loop'])).toBe(2);
    // Ids 6 and 7 end a repeat of (1, 2, 3, 1) and (2, 3, 1, 2); the proposed id 1 makes (3, 1, 2, 1), not seen.
    expect([...extraFeatures(['loop', 'hidden', 'position'], logits, [1, 2, 3, 1, 2, 3, 1, 2])]).toEqual([Math.fround(Math.log(8)), 0, 2 / 8]);
  });

  test('position: log(1 + index), the index being the context length − 1; the hidden states are not extra features', () => {
    const logits = Float32Array.of(0, Math.log(3));
    expect(positionFeature(0)).toBe(0);
    expect(positionFeature(Math.E - 1)).toBeCloseTo(1, 12);
    expect(extraWidth(['hidden', 'previous_hidden', 'position', 'token'])).toBe(1);
    expect([...extraFeatures(['hidden', 'position'], logits, [1, 5, 9, 4])]).toEqual([Math.fround(Math.log(4))]);
    expect([...extraFeatures(['hidden', 'position'], logits, [])]).toEqual([0]); // no context: the first position
    // After the repetition values, whatever the order the groups are listed in.
    const all = extraFeatures(['position', 'hidden', 'repetition', 'logit_stats'], logits, [1, 1]);
    expect(all.length).toBe(9);
    expect(all[8]).toBeCloseTo(Math.log(2), 6);
  });

  test("router.json's features: absent means hidden only; anything else must be known and include hidden", () => {
    expect(parseFeatureGroups(undefined, 'r.json')).toEqual(['hidden']);
    expect(parseFeatureGroups(['repetition', 'hidden'], 'r.json')).toEqual(['hidden', 'repetition']);
    expect(parseFeatureGroups(['token', 'hidden', 'logit_stats'], 'r.json')).toEqual(['hidden', 'logit_stats', 'token']);
    expect(parseFeatureGroups(['position', 'previous_hidden', 'hidden'], 'r.json')).toEqual(['hidden', 'previous_hidden', 'position']);
    expect(() => parseFeatureGroups(['hidden', 'colour'], 'r.json')).toThrow(
      'r.json: features must be a non-empty list of hidden, previous_hidden, logit_stats, repetition, position, token, loop, got ["hidden","colour"]',
    );
    expect(() => parseFeatureGroups(['logit_stats'], 'r.json')).toThrow('r.json: features must include hidden');
  });

  test('feature matrices: the previous hidden state, then the picked columns, after the hidden state', () => {
    const extra = Float32Array.from({ length: 22 }, (_, i) => i); // two rows of 11: logit_stats, repetition, position, loop
    expect([...pickExtraColumns(extra, 2, ['hidden', 'repetition'])]).toEqual([3, 4, 5, 6, 7, 14, 15, 16, 17, 18]);
    expect([...pickExtraColumns(extra, 2, ['hidden', 'position'])]).toEqual([8, 19]);
    expect([...pickExtraColumns(extra, 2, ['hidden', 'loop', 'position'])]).toEqual([8, 9, 10, 19, 20, 21]);
    const x = routerInputs({ count: 2, hiddenSize: 1, hidden: Float32Array.of(-1, -2), extra }, ['hidden', 'logit_stats']);
    expect(x.width).toBe(4);
    expect([...x.features]).toEqual([-1, 0, 1, 2, -2, 11, 12, 13]);
    const rows = { count: 2, hiddenSize: 2, hidden: Float32Array.of(-1, -2, -3, -4), previousHidden: Float32Array.of(0, 0, -1, -2), extra };
    const y = routerInputs(rows, ['hidden', 'previous_hidden', 'position']);
    expect(y.width).toBe(5);
    expect([...y.features]).toEqual([-1, -2, 0, 0, 8, -3, -4, -1, -2, 19]);
    expect(() => routerInputs({ ...rows, previousHidden: undefined }, ['hidden', 'previous_hidden'])).toThrow('needs previous hidden states');
  });
});

describe('divergence labels', () => {
  test('route when the cloud finds the edge token less than half as likely as its own', () => {
    expect(divergenceLabel(0.2, 0.6)).toBe(0);
    expect(divergenceLabel(0.3, 0.6)).toBe(1); // exactly half: a near tie stays on the edge
    expect(divergenceLabel(0.6, 0.6)).toBe(1); // the same token
    expect([...divergenceLabels({ count: 3, cloudProbOfEdgeTop1: Float32Array.of(0.1, 0.5, 0.4), cloudTopProb: Float32Array.of(0.5, 0.5, 0.9) })]).toEqual([
      0, 1, 0,
    ]);
  });
});

describe('loops in generated text', () => {
  test('rep4 counts 4-grams that repeat an earlier one', () => {
    expect(rep4([5, 6, 7, 8, 5, 6, 7, 8])).toEqual({ repeated: 1, total: 5 });
    expect(rep4([1, 1, 1, 1, 1, 1])).toEqual({ repeated: 2, total: 3 });
    expect(rep4([1, 2, 3])).toEqual({ repeated: 0, total: 0 });
    // The ids it counts: the last of each repeated 4-gram.
    expect([...repeatEnds([5, 6, 7, 8, 5, 6, 7, 8])]).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect([...repeatEnds([1, 1, 1, 1, 1, 1])]).toEqual([0, 0, 0, 0, 1, 1]);
  });

  test("the cloud's perplexity outside repeats leaves out the ids that end a repeated 4-gram, and only those", async () => {
    // A scorer whose log-probability of the id at j is -ids[j] / 10: each token's NLL is known exactly.
    const scorer = {
      description: 'exact',
      maxContext: 64,
      vocabSize: 16,
      exact: true,
      calls: 0,
      score: async (ids: readonly number[]) =>
        ids.map((_, i) => ({ nextLogprob: i + 1 < ids.length ? -ids[i + 1]! / 10 : 0, candidateLogprob: 0, topIds: [], topLogprobs: [] })),
    };
    const item = { promptIds: [1, 9], ids: [5, 6, 7, 8, 5, 6, 7, 8, 3], text: '', routed: 0, finishReason: 'length' as const };
    const p = await cloudPerplexity(scorer, [item]);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length / 10;
    expect(p.tokens).toBe(9);
    expect(p.perplexity).toBeCloseTo(Math.exp(mean([5, 6, 7, 8, 5, 6, 7, 8, 3])), 12);
    // Only the second 8 ends a repeated 4-gram (5 6 7 8); the second 5, 6 and 7 do not.
    expect(p.freshTokens).toBe(8);
    expect(p.freshPerplexity).toBeCloseTo(Math.exp(mean([5, 6, 7, 8, 5, 6, 7, 3])), 12);
    // A window shorter than prompt and output: the ids it holds are still matched to the right positions.
    const short = await cloudPerplexity({ ...scorer, maxContext: 6 }, [item]);
    expect(short.tokens).toBe(5);
    expect(short.freshTokens).toBe(4);
    expect(short.freshPerplexity).toBeCloseTo(Math.exp(mean([5, 6, 7, 3])), 12);
  });

  test('stuck: the last 16 ids use at most 2 distinct ids', () => {
    expect(isStuck([9, 8, 7, ...Array.from({ length: 16 }, (_, i) => (i % 2 ? 4 : 5))])).toBe(true);
    expect(isStuck([...Array.from({ length: 15 }, (_, i) => (i % 2 ? 4 : 5)), 6])).toBe(false);
    expect(isStuck(Array.from({ length: 15 }, () => 3))).toBe(false); // too short to tell
  });

  test('figures pooled over outputs, with the common prefix against a reference', () => {
    expect(commonPrefix([1, 2, 3], [1, 2, 4])).toBe(2);
    const stuck = Array.from({ length: 16 }, () => 3);
    const f = freeRunningFigures(
      [[1, 2, 3, 4, 1, 2, 3, 4], stuck],
      [
        [1, 2, 9],
        [3, 3],
      ],
    );
    expect(f).toEqual({ rep4: (1 + 12) / (5 + 13), stuck: 1, outputs: 2, distinct: 2, lcp: 2 });
  });

  test('distinct outputs: the same ids from two prompts count once', () => {
    expect(freeRunningFigures([[1, 2, 3], [1, 2, 3], [1, 2], []]).distinct).toBe(3);
    // [1, 23] and [12, 3] differ: ids are compared as ids, not as joined digits.
    expect(
      freeRunningFigures([
        [1, 23],
        [12, 3],
      ]).distinct,
    ).toBe(2);
  });
});

describe('teacher forcing at fixed shares', () => {
  test('recovered fractions of the gap, exact on eight positions', () => {
    // Positions 0–3: only the cloud is right (fixable); 4–5 both right; 6 only the edge; 7 neither.
    const outcomes = { count: 8, edgeCorrect: [0, 0, 0, 0, 1, 1, 1, 0], cloudCorrect: [1, 1, 1, 1, 1, 1, 0, 0] };
    // small 3/8, large 6/8: the gap is 3/8.
    const router = [0.1, 0.2, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]; // ranks two fixable positions first
    const top1 = [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.1, 0.2]; // ranks the edge-only and the hopeless position first
    const entropy = [0.5, 0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9]; // one fixable, one neutral
    const [quarter, half] = atShare(outcomes, { router, top1, entropy }, [0.25, 0.5]);
    expect(quarter!.routed).toBe(2);
    expect(quarter!.router).toBeCloseTo(2 / 3, 12);
    expect(quarter!.top1).toBeCloseTo(-1 / 3, 12);
    expect(quarter!.entropy).toBeCloseTo(1 / 3, 12);
    expect(quarter!.oracle).toBeCloseTo(2 / 3, 12);
    expect(quarter!.small_only_accuracy).toBe(3 / 8);
    expect(quarter!.large_only_accuracy).toBe(6 / 8);
    expect(half!.routed).toBe(4);
    // All four fixable positions routed and the edge-only one kept: better than the cloud alone.
    expect(half!.oracle).toBeCloseTo(4 / 3, 12);
  });
});

describe('text splits', () => {
  test('auto picks <|endoftext|>, then blank lines, then lines', () => {
    expect(detectSplit('a\n<|endoftext|>\nb')).toBe('endoftext');
    expect(detectSplit('a\nb\n\nc')).toBe('blank-line');
    expect(detectSplit('a\nb\n')).toBe('line');
    expect(splitText('Once.\nTwice.<|endoftext|> Three. \n<|endoftext|>')).toEqual({ split: 'endoftext', paragraphs: ['Once.\nTwice.', 'Three.'] });
    expect(splitText('a\nb\n\n\nc\n')).toEqual({ split: 'blank-line', paragraphs: ['a\nb', 'c'] });
    expect(splitText('one story\n\n', 'line')).toEqual({ split: 'line', paragraphs: ['one story'] });
    expect(splitText(' s1 \ns2\n')).toEqual({ split: 'line', paragraphs: ['s1', 's2'] });
  });
});
