/**
 * Finds measured figures in source comments: a sentence of a comment that holds a quantity with a unit
 * (`20.7 ms`, `25 MB`, `23.8%`, `11 points`, `2×`) or a quality figure (`perplexity 47.5`) next to words
 * that say it was measured (`took`, `ran at`, `median`, `instead of`, `on a 2-core VM`, `cost about`, ...).
 * A figure belongs in docs/results/*.jsonl and the generated docs/results.md, where it has a command, a
 * machine and a date; a comment says why and links there. Defaults, limits and examples pass: `Default 10 s`,
 * `2 s when omitted`, `at most 4 MiB`, `// ≈ 170 ms round trip`, sizes worked out from shapes (`608 KB`).
 *
 * @example
 * measuredFigures('// ran at a median of 20.7 ms instead of 22.6 ms'); // ['ran at a median of 20.7 ms instead of 22.6 ms']
 * measuredFigures('// Deadline of one step. Default 10 s.');                  // []
 */

/** A quantity with a unit, a range of them (`15 to 82 ms`, `20.7–26.8 ms`), or a quality figure. */
const FIGURE =
  /\d[\d,]*(?:\.\d+)?\s?(?:(?:–|-|to)\s?\d[\d,]*(?:\.\d+)?\s?)?(?:ms|µs|ns|s|seconds?|minutes?|KB|KiB|MB|MiB|GB|GiB|%|×|points?|pages)(?![\w])|\b(?:perplexity|rep4|accuracy|agreement|AUC)\s(?:of\s)?\d/;

/** Words that report a measurement rather than set a value. */
const MEASURED = new RegExp(
  [
    /(?<!the )\bmeasured\b/, // `measured 23.8%`, `measured: 512 entries 0.005 ms` (not "the measured hit rate")
    /\b(?:took|ran (?:at|in)|median|in about|faster|slower|recovers?)\b/,
    /\binstead of ~?\d/, // `~400 pages a step instead of ~600`
    /\b\d+-core\b|\bVM\b|\bx86-64 core\b/, // the machine it ran on
    /\bcost(?:s|ing)? (?:the|up to|about)\b/, // `cost up to 12 ms`, `cost the demo pack 11 points`
    /\babout \d[\d,.]*\s?(?:ms|µs|s)\b/, // a time read off a run, not set
    /\bby \d[\d.]*\s?×|\bagainst \d|\bpoints? (?:above|below|more|less)\b/, // a comparison of two figures
  ]
    .map((part) => part.source)
    .join('|'),
  'i',
);

/** The text of every comment in `source`: block comments whole, runs of `//` lines joined. */
export function commentTexts(source: string): string[] {
  const texts: string[] = [];
  let run: string[] = [];
  let inBlock = false;
  const flush = () => {
    if (run.length) texts.push(run.join(' '));
    run = [];
  };
  for (const line of source.split('\n')) {
    const trimmed = line.trim();
    if (inBlock || trimmed.startsWith('/*')) {
      run.push(
        trimmed
          .replace(/^\/\*\*?|\*\/$/g, '')
          .replace(/^\*(?!\/)/, '')
          .trim(),
      );
      inBlock = !trimmed.endsWith('*/');
      if (!inBlock) flush();
      continue;
    }
    // A `//` comment on a line of its own, or after code (not `://` in a URL).
    const at = trimmed.startsWith('//') ? 0 : trimmed.search(/\s\/\/\s/);
    if (at >= 0) run.push(trimmed.slice(at).replace(/^\s*\/\/\s?/, ''));
    else flush();
    if (at > 0) flush();
  }
  flush();
  return texts;
}

/** The sentences of `comment` that give a measured figure. */
export function measuredFigures(source: string): string[] {
  return commentTexts(source)
    .flatMap((text) => text.split(/(?<=[.;])\s+(?=[A-Z`(])|;\s+/))
    .filter((sentence) => FIGURE.test(sentence) && MEASURED.test(sentence));
}

/** A quantity with a unit of time, size or speed, a percentage, or a ratio, as prose would type it. */
const PROSE_FIGURE = /\d[\d.,½]*\s?(?:ms|µs|s|seconds?|minutes?|bytes|KB|KiB|MB|MiB|GB|GiB|tokens\/s|steps\/s|×)(?![\w])|\d+(?:\.\d+)?%/;

/**
 * The lines of a Markdown page's prose that type a figure by hand: code blocks and `code spans` (commands,
 * flags, defaults) are left out, so what remains is a figure someone read off a run.
 */
export function handTypedFigures(markdown: string): string[] {
  return markdown
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '')
    .split('\n')
    .filter((line) => PROSE_FIGURE.test(line));
}
