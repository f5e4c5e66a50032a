/**
 * Scores the edge's private-entity detector (src/edge/privacy) on the labelled table: precision and recall
 * per kind, a found entity counting only where its span and kind are exactly the labelled ones. The table of
 * scores in docs/privacy-detection.md is this script's output (`--write` puts it there, `--check` fails when
 * the page differs; tests/private-detect-scores.test.ts checks it too). `-v` lists each miss and each false find.
 *
 * @example
 * ```sh
 * bun scripts/pii-detector-table.ts           # prints the scores
 * bun scripts/pii-detector-table.ts --write   # puts them in docs/privacy-detection.md
 * ```
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { BUILT_IN_KINDS, PrivateDetector, type DetectedSpan } from '../src/edge/privacy/private-detect.ts';
import { LABELLED_CASES, type LabelledCase } from '../tests/fixtures/private-detect-table.ts';

export const DETECTION_PAGE = 'docs/privacy-detection.md';
const BEGIN = '<!-- scores: bun scripts/pii-detector-table.ts --write -->';
const END = '<!-- /scores -->';

export interface KindScore {
  kind: string;
  labelled: number;
  found: number;
  right: number;
}

export interface TableScores {
  cases: number;
  withoutEntities: number;
  kinds: KindScore[];
  /** Each miss and false find, as a line. */
  mistakes: string[];
}

export const precisionOf = (s: KindScore) => (s.found === 0 ? 1 : s.right / s.found);
export const recallOf = (s: KindScore) => (s.labelled === 0 ? 1 : s.right / s.labelled);

/** The detector with every built-in kind on, scored on `cases`. */
export function scoreDetector(cases: readonly LabelledCase[] = LABELLED_CASES): TableScores {
  const detector = PrivateDetector.create(BUILT_IN_KINDS, []);
  const kinds = BUILT_IN_KINDS.map((kind): KindScore => ({ kind, labelled: 0, found: 0, right: 0 }));
  const tally = (kind: string) => kinds.find((k) => k.kind === kind)!;
  const same = (a: DetectedSpan, b: DetectedSpan) => a.start === b.start && a.end === b.end && a.kind === b.kind;
  const mistakes: string[] = [];
  for (const { text, expected } of cases) {
    const labelled = expected.map(([kind, entity]) => ({ kind, start: text.indexOf(entity), end: text.indexOf(entity) + entity.length }));
    const found = detector.detect(text);
    for (const span of labelled) {
      tally(span.kind).labelled++;
      if (!found.some((f) => same(f, span)))
        mistakes.push(`missed ${span.kind} ${JSON.stringify(text.slice(span.start, span.end))} in ${JSON.stringify(text)}`);
    }
    for (const span of found) {
      tally(span.kind).found++;
      if (labelled.some((l) => same(l, span))) tally(span.kind).right++;
      else mistakes.push(`false ${span.kind} ${JSON.stringify(text.slice(span.start, span.end))} in ${JSON.stringify(text)}`);
    }
  }
  return { cases: cases.length, withoutEntities: cases.filter((c) => c.expected.length === 0).length, kinds, mistakes };
}

/** The scores as the page shows them. */
export function scoresMarkdown(scores: TableScores): string {
  const rows = scores.kinds.map(
    (s) => `| \`${s.kind}\` | ${s.labelled} | ${s.found} | ${s.right} | ${precisionOf(s).toFixed(2)} | ${recallOf(s).toFixed(2)} |`,
  );
  return [
    `${scores.cases} cases, ${scores.withoutEntities} of them with no entity (look-alikes and prose). Every built-in kind on.`,
    '',
    '| kind | labelled | found | right | precision | recall |',
    '|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/** The page with its scores section replaced by `scores`; throws when the page has no such section. */
export function pageWithScores(page: string, scores: string): string {
  const begin = page.indexOf(BEGIN);
  const end = page.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`${DETECTION_PAGE} has no section between ${BEGIN} and ${END}`);
  return `${page.slice(0, begin + BEGIN.length)}\n${scores}\n${page.slice(end)}`;
}

if (import.meta.main) {
  const started = performance.now();
  const scores = scoreDetector();
  const ms = performance.now() - started;
  if (process.argv.includes('-v')) for (const line of scores.mistakes) console.log(line);
  const markdown = scoresMarkdown(scores);
  const page = () => readFileSync(DETECTION_PAGE, 'utf8');
  if (process.argv.includes('--write')) {
    writeFileSync(DETECTION_PAGE, pageWithScores(page(), markdown));
    console.log(`wrote the scores into ${DETECTION_PAGE}`);
  } else if (process.argv.includes('--check')) {
    if (pageWithScores(page(), markdown) !== page()) {
      console.error(`${DETECTION_PAGE}'s scores are not what the table gives: run bun scripts/pii-detector-table.ts --write`);
      process.exit(1);
    }
    console.log(`${DETECTION_PAGE}'s scores are up to date`);
  } else {
    console.log(markdown);
    console.log(`\n${ms.toFixed(0)} ms (the first call loads the phone metadata)`);
  }
}
