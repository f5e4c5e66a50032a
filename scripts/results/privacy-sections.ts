/**
 * docs/results.md's section on what private spans cost, from `bun run eval --private-entities N --json`:
 * the same held-out stories with synthetic entities, evaluated without and with pseudonyms side by side
 * (src/tools/eval/private-spans-eval.ts; docs/privacy-costs.md says what each figure is).
 *
 * @example
 * ```ts
 * const markdown = privateSpansSection(readDataFile('docs/results', 'demo-eval-private-spans'));
 * ```
 */
import type { DataFile, Fields } from './data-file.ts';
import { f2, f3, pct, provenance, table } from './markdown.ts';

/** One row per figure, one column per run (without, with pseudonyms). */
const ROWS: [string, (run: Fields) => string][] = [
  ['teacher forcing: positions routed', (r) => pct(r.obj('teacher_forcing').num('routed_share'))],
  ['… of them kept home (withheld)', (r) => String(r.obj('teacher_forcing').num('withheld'))],
  ['… positions the cloud decided', (r) => pct(r.obj('teacher_forcing').num('cloud_share'))],
  ['… next-token accuracy', (r) => f3(r.obj('teacher_forcing').num('accuracy'))],
  ['… gap recovered', (r) => pct(r.obj('teacher_forcing').num('gap_recovered'))],
  ['… placeholders the cloud read', (r) => String(r.obj('teacher_forcing').num('placeholders'))],
  ['generation: tokens the cloud decided', (r) => pct(r.obj('generation').num('routed_share'))],
  ['… withheld steps', (r) => String(r.obj('generation').num('withheld_steps'))],
  ['… placeholders the cloud read', (r) => String(r.obj('generation').num('placeholders'))],
  ['… token ids sent', (r) => String(r.obj('generation').num('tokens_sent'))],
  ['… bytes sent', (r) => String(r.obj('generation').num('bytes_sent'))],
  ['… ms per token (all; cloud steps)', (r) => `${f2(r.obj('generation').num('ms_per_token'))}; ${f2(r.obj('generation').num('cloud_ms_per_token'))}`],
  [
    '… ms between tokens (of it translating placeholders)',
    (r) => `${f2(r.obj('generation').num('ms_between_tokens'))} (${f3(r.obj('generation').num('pseudonym_ms_per_token'))})`,
  ],
  ["… cloud model's perplexity of the output", (r) => f2(r.obj('generation').num('cloud_perplexity'))],
  ['… cloud texts holding an inserted entity', (r) => `${r.obj('generation').num('cloud_texts_with_entities')} of ${r.obj('generation').num('prompts')}`],
];

export function privateSpansSection(file: DataFile): string {
  const d = file.data;
  const runs = d.list('runs');
  const check = d.obj('leak_check');
  const sections = [
    provenance(file),
    '',
    `${d.num('paragraphs')} held-out stories with ${d.num('entities_per_paragraph')} synthetic entities each (a name, an email, a phone number), ` +
      `${d.num('positions')} teacher-forced positions (edge alone ${f3(d.num('small_only_accuracy'))}, cloud alone ${f3(d.num('large_only_accuracy'))}); ` +
      `${d.num('continuations')} generations of ${d.num('max_new_tokens')} tokens from the stories' openings. What each figure is: [privacy-costs.md](privacy-costs.md).`,
  ];
  for (const threshold of [...new Set(runs.map((r) => r.num('threshold')))]) {
    const plain = runs.find((r) => r.num('threshold') === threshold && !r.bool('pseudonyms'))!;
    const pseudonymised = runs.find((r) => r.num('threshold') === threshold && r.bool('pseudonyms'))!;
    sections.push(
      '',
      `τ ${f2(threshold)}:`,
      '',
      table(
        ['', 'without pseudonyms', 'with pseudonyms'],
        ROWS.map(([label, value]) => [label, value(plain), value(pseudonymised)]),
      ),
    );
    const ratio = pseudonymised.obj('generation').num('ms_between_tokens') / plain.obj('generation').num('ms_between_tokens');
    sections.push('', `Time between tokens with pseudonyms: ${f3(ratio)}× without (target ≤ 1.05: ${ratio <= 1.05 ? 'met' : 'missed'}).`);
  }
  sections.push(
    '',
    `Leak check: ${check.bool('passed') ? 'passed' : 'FAILED'}; ${check.num('context_leaks')} of ${check.num('contexts_checked')} contexts sent with pseudonyms, and ` +
      `${check.num('cloud_text_leaks')} of ${check.num('cloud_texts_checked')} cloud texts, hold an inserted entity (without pseudonyms ${check.num('plain_contexts_with_entities')} contexts do).`,
  );
  return sections.join('\n');
}
