/**
 * The detector's precision and recall per kind on the labelled table (scripts/pii-detector-table.ts): the
 * figures docs/privacy-detection.md shows are what the table gives, every kind meets issue 53's targets
 * (recall ≥ 0.99, precision ≥ 0.95), and the only mistakes are the false finds the table names as known.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { DETECTION_PAGE, pageWithScores, precisionOf, recallOf, scoreDetector, scoresMarkdown } from '../scripts/pii-detector-table.ts';
import { BUILT_IN_KINDS } from '../src/edge/privacy/private-detect.ts';
import { LABELLED_CASES } from './fixtures/private-detect-table.ts';

const scores = scoreDetector();

describe('the labelled table scores', () => {
  test('docs/privacy-detection.md shows them (bun scripts/pii-detector-table.ts --write)', () => {
    const page = readFileSync(DETECTION_PAGE, 'utf8');
    expect(pageWithScores(page, scoresMarkdown(scores))).toBe(page);
  });

  test('every built-in kind: recall at least 0.99, precision at least 0.95', () => {
    expect(scores.kinds.map((s) => s.kind)).toEqual([...BUILT_IN_KINDS]);
    for (const score of scores.kinds) {
      expect({ kind: score.kind, recall: recallOf(score) >= 0.99, precision: precisionOf(score) >= 0.95 }).toEqual({
        kind: score.kind,
        recall: true,
        precision: true,
      });
    }
  });

  test('the only mistakes are the known false finds', () => {
    const known = LABELLED_CASES.flatMap((c) =>
      (c.knownFalseFinds ?? []).map(([kind, entity]) => `false ${kind} ${JSON.stringify(entity)} in ${JSON.stringify(c.text)}`),
    );
    expect(known.length).toBeGreaterThan(0);
    expect(scores.mistakes).toEqual(known);
  });

  test('a miss and a false find are counted against the kind they belong to', () => {
    const table = scoreDetector([
      // Labelled an address, but written as a version: a miss. Labelled nothing, but an address: a false find.
      {
        text: 'mail ann@example.com about firmware 10.0.0.1',
        expected: [
          ['email', 'ann@example.com'],
          ['ip', '10.0.0.1'],
        ],
      },
      { text: 'the build server is 192.168.0.1', expected: [] },
    ]);
    const ip = table.kinds.find((s) => s.kind === 'ip')!;
    expect(ip).toEqual({ kind: 'ip', labelled: 1, found: 1, right: 0 });
    expect([precisionOf(ip), recallOf(ip)]).toEqual([0, 0]);
    expect(table.kinds.find((s) => s.kind === 'email')).toEqual({ kind: 'email', labelled: 1, found: 1, right: 1 });
    expect(table.mistakes).toEqual([
      'missed ip "10.0.0.1" in "mail ann@example.com about firmware 10.0.0.1"',
      'false ip "192.168.0.1" in "the build server is 192.168.0.1"',
    ]);
  });

  test('a page without the scores markers is refused, naming them', () => {
    expect(() => pageWithScores('# no scores here\n', 'x')).toThrow(
      'docs/privacy-detection.md has no section between <!-- scores: bun scripts/pii-detector-table.ts --write --> and <!-- /scores -->',
    );
  });
});
