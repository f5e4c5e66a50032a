/**
 * Scores the edge's private-entity detector (src/edge/privacy) on the labelled table: precision and recall
 * per kind, a found entity counting only where its span and kind are exactly the labelled ones. `-v` lists
 * each miss and each false find. The comparison with other libraries is in docs/privacy-detection.md.
 *
 * @example
 * bun scripts/pii-detector-table.ts
 */
import { BUILT_IN_KINDS, PrivateDetector, type DetectedSpan } from '../src/edge/privacy/private-detect.ts';
import { LABELLED_CASES } from '../tests/fixtures/private-detect-table.ts';

const verbose = process.argv.includes('-v');
const detector = PrivateDetector.create(BUILT_IN_KINDS, []);
const tally = new Map(BUILT_IN_KINDS.map((kind) => [kind as string, { right: 0, found: 0, labelled: 0 }]));
const same = (a: DetectedSpan, b: DetectedSpan) => a.start === b.start && a.end === b.end && a.kind === b.kind;

const started = performance.now();
for (const { text, expected } of LABELLED_CASES) {
  const labelled = expected.map(([kind, entity]) => ({ kind, start: text.indexOf(entity), end: text.indexOf(entity) + entity.length }));
  const found = detector.detect(text);
  for (const span of labelled) tally.get(span.kind)!.labelled++;
  for (const span of found) {
    const counts = tally.get(span.kind)!;
    counts.found++;
    if (labelled.some((l) => same(l, span))) counts.right++;
    else if (verbose) console.log(`false ${span.kind} ${JSON.stringify(text.slice(span.start, span.end))} in ${JSON.stringify(text)}`);
  }
  if (verbose) for (const span of labelled) if (!found.some((f) => same(f, span))) console.log(`missed ${span.kind} ${JSON.stringify(text.slice(span.start, span.end))} in ${JSON.stringify(text)}`);
}
const ms = performance.now() - started;

const ratio = (n: number, d: number) => (d === 0 ? '–' : (n / d).toFixed(2));
console.log(`${LABELLED_CASES.length} cases, ${ms.toFixed(0)} ms (the first call loads the phone metadata)`);
console.log('| kind | labelled | found | precision | recall |');
console.log('|---|---|---|---|---|');
for (const [kind, { right, found, labelled }] of tally) console.log(`| ${kind} | ${labelled} | ${found} | ${ratio(right, found)} | ${ratio(right, labelled)} |`);
