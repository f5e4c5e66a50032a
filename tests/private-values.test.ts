/**
 * The pieces of the privacy layer, each against exact values: private values and their placeholders, the
 * spans a request marks, the text of a token context as it grows and is cut back, and the pseudonymiser's
 * two translations on the demo tokenizer.
 */
import { beforeAll, describe, expect, test } from 'bun:test';
import { readPrivateSpans } from '../src/edge/privacy/private-spans.ts';
import { PrivateValues, MAX_PRIVATE_VALUES } from '../src/edge/privacy/private-values.ts';
import { Pseudonymiser } from '../src/edge/privacy/pseudonymiser.ts';
import { TokenTexts } from '../src/edge/privacy/token-texts.ts';
import { encodeContinuation } from '../src/edge/privacy/encode-continuation.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

let tokenizer: TextTokenizer;
beforeAll(async () => {
  tokenizer = await TextTokenizer.fromPack((await ensureDemoPacks()).edgePack);
});

const values = (texts: [string, string][], prompt = '') =>
  PrivateValues.of(
    texts.map(([text, kind]) => ({ text, kind })),
    prompt,
  );

describe('private values', () => {
  test('a placeholder per value, numbered per kind in order; the same value keeps its placeholder; whitespace is not part of a value', () => {
    const v = values([
      ['Ann Lee', 'name'],
      [' ann@x.org ', 'email'],
      ['Bo', 'name'],
      ['Ann Lee', 'name'],
      ['ann@x.org', 'email'],
    ]);
    expect(v.list.map((x) => [x.text, x.placeholder])).toEqual([
      ['Ann Lee', '[NAME_1]'],
      ['ann@x.org', '[EMAIL_1]'],
      ['Bo', '[NAME_2]'],
    ]);
  });

  test('a placeholder that the prompt already holds is skipped: the user\'s own "[EMAIL_1]" is never restored into a value', () => {
    const v = values([['ann@x.org', 'email']], 'my template says [EMAIL_1] and [EMAIL_2]');
    expect(v.list[0]!.placeholder).toBe('[EMAIL_3]');
  });

  test('at most MAX_PRIVATE_VALUES distinct values', () => {
    const many = Array.from({ length: MAX_PRIVATE_VALUES + 1 }, (_, i): [string, string] => [`v${i}`, 'private']);
    expect(() => values(many)).toThrow(/at most 256 distinct private values/);
  });

  test.each([
    [
      'Ann Lee met Ann',
      [
        [0, 7],
        [12, 15],
      ],
    ],
    ['Ann Lee Park', [[0, 12]]],
    [
      'Lee Park and Ann',
      [
        [0, 8],
        [13, 16],
      ],
    ],
    ['nothing here', []],
  ])('private ranges of %p: overlapping values merge', (text, expected) => {
    const v = values([
      ['Ann Lee', 'name'],
      ['Lee Park', 'name'],
      ['Ann', 'name'],
    ]);
    expect(v.privateRanges(text).map((r) => [r.start, r.end])).toEqual(expected as number[][]);
  });

  test.each([
    ['he wrote to Zeno', true],
    ['he wrote to Z', true],
    // "Zenobia" is a value, and also the start of a longer one: the next tokens may make it that one.
    ['he wrote to Zenobia', true],
    ['he wrote to Zenobia K', true],
    ['he wrote to Zenobia Kraszewski', false],
    ['he wrote to you', false],
    ['', false],
  ])('the end of %p is inside a value: %p', (text, inside) => {
    expect(
      values([
        ['Zenobia Kraszewski', 'name'],
        ['Zenobia', 'name'],
      ]).endsInsideValue(text),
    ).toBe(inside);
  });
});

describe('private spans', () => {
  const prompt = '🙂 Ann wrote to bo@x.org';
  test('code points, not UTF-16 units: the emoji counts one', () => {
    expect(readPrivateSpans([[0, 1], [2, 5, 'name'], { start: 15, end: 23, kind: 'email' }], prompt, 'private_spans')).toEqual([
      { text: '🙂', kind: 'private' },
      { text: 'Ann', kind: 'name' },
      { text: 'bo@x.org', kind: 'email' },
    ]);
  });

  test.each([
    ['a number', 5, /must be a list/],
    ['out of range', [[20, 30]], /not a non-empty range inside the text's 23 code points/],
    ['empty', [[3, 3]], /not a non-empty range/],
    ['negative', [[-1, 2]], /not a non-empty range/],
    [
      'overlapping',
      [
        [2, 5],
        [4, 8],
      ],
      /overlaps or comes before/,
    ],
    [
      'out of order',
      [
        [6, 9],
        [2, 5],
      ],
      /overlaps or comes before/,
    ],
    ['not integers', [[1.5, 3]], /must be integers/],
    ['a bad kind', [[2, 5, 'Name!']], /kind must be lowercase/],
    ['whitespace only', [[1, 2]], /holds only whitespace/],
    ['an unknown field', [{ start: 2, end: 5, why: 'x' }], /unknown field "why"/],
    ['a prototype key', [{ start: 2, end: 5, constructor: 1 }], /unknown field "constructor"/],
  ])('%s is refused with a message', (_, raw, message) => {
    expect(() => readPrivateSpans(raw, prompt, 'private_spans')).toThrow(message as RegExp);
  });
});

describe('the text of a token context', () => {
  test('grown token by token and cut back at random, it is always the decoded text, and each token writes its own characters', () => {
    const random = seededRandom(3);
    const ids = tokenizer.encode('Tim saw 日本 and é, then 🙂 — "Zenobia" said: ok.\nThe end.', { addBos: true });
    const texts = new TokenTexts(tokenizer);
    for (let round = 0; round < 300; round++) {
      const length = Math.floor(random() * (ids.length + 1));
      // A different token at the cut: a rejected guess.
      const context = [...ids.slice(0, length), ...(random() < 0.3 ? [ids[(length * 7) % ids.length]!] : [])];
      texts.update(context);
      // A character still missing bytes is not text yet (decode shows it as U+FFFD).
      expect(texts.text).toBe(tokenizer.decode(context).replace(/\uFFFD+$/, ''));
      for (let i = 0; i < context.length; i++) {
        const { start, end } = texts.rangeOf(i);
        expect(start).toBeLessThanOrEqual(end);
        if (i > 0) expect(start).toBeGreaterThanOrEqual(texts.rangeOf(i - 1).start);
      }
    }
  });
});

describe('the pseudonymiser', () => {
  const sources = (n: number) => Array.from({ length: n }, () => 'prompt' as const);

  test('every token writing a private character goes, run by run, as the run with placeholders; the rest is the same ids', () => {
    const v = values([
      ['Zenobia', 'name'],
      ['zen@x.org', 'email'],
    ]);
    const prompt = 'Once Zenobia wrote (zen@x.org) to Tim. Zenobia';
    const ids = tokenizer.encode(prompt, { addBos: true });
    const cloud = new Pseudonymiser(tokenizer, v).toCloud(ids, sources(ids.length));
    expect(tokenizer.decode(cloud.ids)).toBe('Once [NAME_1] wrote ([EMAIL_1]) to Tim. [NAME_1]');
    expect(cloud.ids[0]).toBe(ids[0]!);
    expect(cloud.sources.length).toBe(cloud.ids.length);
    expect([...cloud.placeholders].sort()).toEqual(['[EMAIL_1]', '[NAME_1]']);
    expect(cloud.withheld).toBe(false);
  });

  test('a context ending inside a value is withheld; once the value is complete it goes as its placeholder', () => {
    const pseudonyms = new Pseudonymiser(tokenizer, values([['Zenobia', 'name']]));
    const head = tokenizer.encode('Once Zenobia met Zen', { addBos: true });
    expect(pseudonyms.toCloud(head, sources(head.length)).withheld).toBe(true);
    const whole = tokenizer.encode('Once Zenobia met Zenobia', { addBos: true });
    const cloud = pseudonyms.toCloud(whole, sources(whole.length));
    expect(cloud.withheld).toBe(false);
    expect(tokenizer.decode(cloud.ids)).toBe('Once [NAME_1] met [NAME_1]');
  });

  test("the cloud's placeholder comes back as the value, spelled by the edge's tokenizer", () => {
    const pseudonyms = new Pseudonymiser(tokenizer, values([['Zenobia', 'name']]));
    const context = tokenizer.encode('Once [NAME_1] met', { addBos: true });
    const reply = encodeContinuation(tokenizer, ' [NAME_1].');
    expect(pseudonyms.placeholdersIn(context, reply.slice(0, 3))).toEqual({ inside: true, complete: 0 });
    expect(pseudonyms.placeholdersIn(context, reply)).toEqual({ inside: false, complete: 1 });
    const back = pseudonyms.fromCloud(context, reply, context.length);
    expect(back.restored).toBe(true);
    expect(back.text).toBe(' Zenobia.');
    expect(tokenizer.decode([...context, ...back.ids])).toBe('Once [NAME_1] met Zenobia.');
    expect(pseudonyms.fromCloud(context, encodeContinuation(tokenizer, ' the [cat]'), context.length)).toMatchObject({ restored: false, text: ' the [cat]' });
  });

  test('seeded contexts: whatever is not withheld holds no value, and its placeholders restore the text', () => {
    const random = seededRandom(11);
    const names = ['Zenobia', 'Quillon Vasquez', 'q.v@example.org', '日本', 'Bo'];
    const v = values(names.map((n) => [n, 'name']));
    const pseudonyms = new Pseudonymiser(tokenizer, v);
    const words = ['the', 'dog', 'Zen', 'obia', 'Quillon', 'Vasquez', 'q.v@', 'example.org', '日', '本', 'Bob', 'ran', '.', ',', '🙂'];
    let checked = 0;
    for (let round = 0; round < 2000; round++) {
      const text = Array.from({ length: 3 + Math.floor(random() * 12) }, () => words[Math.floor(random() * words.length)]).join(random() < 0.5 ? ' ' : '');
      const ids = tokenizer.encode(text, { addBos: true });
      const cloud = pseudonyms.toCloud(ids, sources(ids.length));
      if (cloud.withheld) continue;
      checked++;
      const sent = tokenizer.decode(cloud.ids);
      for (const name of names) expect(sent.includes(name)).toBe(false);
      const back = new Pseudonymiser(tokenizer, v).fromCloud([], cloud.ids, 0);
      expect(v.privateRanges(back.text).length).toBe(v.privateRanges(tokenizer.decode(ids)).length);
    }
    expect(checked).toBeGreaterThan(500);
  });
});
