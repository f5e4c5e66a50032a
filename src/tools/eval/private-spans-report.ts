/**
 * What `bun run eval --private-entities N` prints: one table per τ, without and with pseudonyms side by
 * side, the leak check and an example of what the cloud saw; and the JSON object's body (eval-report.ts adds
 * the data set and the models and turns the keys to snake_case): `{evaluation: 'private-spans',
 * entities_per_paragraph, paragraphs, positions, runs: [{threshold, pseudonyms, teacher_forcing: {routed_share,
 * withheld, cloud_share, accuracy, gap_recovered, placeholders}, generation: {routed_share, withheld_steps,
 * placeholders, tokens_sent, bytes_sent, ms_per_token, cloud_ms_per_token, cloud_perplexity, ...}}],
 * leak_check: {passed, contexts_checked, context_leaks, cloud_texts_checked, cloud_text_leaks, ...}, example}`.
 */
import type { PrivacyRun, PrivateSpansResult } from './private-spans-eval.ts';
import { f2, f3, pct, table } from './report-format.ts';

/** One row per figure, one column per run (without, with pseudonyms). */
const ROWS: [string, (run: PrivacyRun) => string][] = [
  ['teacher forcing: positions routed by the router', (r) => `${r.teacherForcing.routed} (${pct(r.teacherForcing.routedShare)})`],
  ['… of them kept home (withheld)', (r) => String(r.teacherForcing.withheld)],
  ['… positions the cloud decided', (r) => pct(r.teacherForcing.cloudShare)],
  ['… next-token accuracy', (r) => f3(r.teacherForcing.accuracy)],
  ['… gap recovered', (r) => pct(r.teacherForcing.gapRecovered)],
  ['… placeholders the cloud read', (r) => String(r.teacherForcing.placeholders)],
  ['generation: tokens the cloud decided', (r) => `${r.generation.routed} of ${r.generation.tokens} (${pct(r.generation.routedShare)})`],
  ['… withheld steps', (r) => String(r.generation.withheldSteps)],
  ['… placeholders the cloud read', (r) => String(r.generation.placeholders)],
  ['… token ids sent', (r) => String(r.generation.tokensSent)],
  ['… bytes sent', (r) => String(r.generation.bytesSent)],
  ['… steps, streams opened', (r) => `${r.generation.steps}, ${r.generation.streams}`],
  ['… ms per token (all; cloud steps)', (r) => `${f2(r.generation.msPerToken)}; ${f2(r.generation.cloudMsPerToken)}`],
  ['… ms between tokens (of it translating placeholders)', (r) => `${f2(r.generation.msBetweenTokens)} (${f3(r.generation.pseudonymMsPerToken)})`],
  ["… cloud model's perplexity of the output", (r) => f2(r.generation.cloudPerplexity)],
  ['… cloud texts holding an inserted entity', (r) => `${r.generation.cloudTextsWithEntities} of ${r.generation.prompts}`],
];

export function privateSpansMarkdown(r: PrivateSpansResult): string {
  const check = r.leakCheck;
  const sections = [
    `${r.paragraphs} stories with ${r.entitiesPerParagraph} synthetic entities each (${r.entities} in all: names, emails, phone numbers), ${r.positions} teacher-forced positions` +
      `${r.skippedParagraphs ? ` (${r.skippedParagraphs} paragraphs left out: longer than the context window with their entities)` : ''}; ` +
      `edge-only next-token accuracy ${f3(r.smallOnlyAccuracy)}, cloud-only ${f3(r.largeOnlyAccuracy)}. Generations: ${r.continuations} prompts (each story up to its last inserted sentence), ${r.maxNewTokens} new tokens, greedy.`,
  ];
  for (const threshold of [...new Set(r.runs.map((run) => run.threshold))]) {
    const plain = r.runs.find((run) => run.threshold === threshold && !run.pseudonyms)!;
    const pseudonymised = r.runs.find((run) => run.threshold === threshold && run.pseudonyms)!;
    const ratio = pseudonymised.generation.msBetweenTokens / plain.generation.msBetweenTokens;
    sections.push(
      '',
      `τ ${f2(threshold)}; ${plain.generation.identicalOutputs} of ${plain.generation.prompts} generations the same token for token with and without pseudonyms:`,
      '',
      table(
        ['', 'without pseudonyms', 'with pseudonyms'],
        ROWS.map(([label, value]) => [label, value(plain), value(pseudonymised)]),
      ),
      '',
      `Time between tokens with pseudonyms: ${f3(ratio)}× without (target ≤ 1.05: ${ratio <= 1.05 ? 'met' : 'missed'}).`,
    );
  }
  sections.push(
    '',
    `Leak check: ${check.passed ? 'passed' : '**FAILED**'}. ${check.contextLeaks} of ${check.contextsChecked} contexts sent by the pseudonymised runs and ` +
      `${check.cloudTextLeaks} of ${check.cloudTextsChecked} of their cloud texts hold an inserted entity's text (without pseudonyms: ${check.plainContextsWithEntities} contexts do).`,
  );
  if (r.example) {
    sections.push(
      '',
      `Example: the prompt ${JSON.stringify(r.example.prompt)} with ${r.example.entities.map((e) => `${e.kind} ${JSON.stringify(e.text)}`).join(', ')} private; ` +
        `the cloud saw ${JSON.stringify(r.example.cloudText)}.`,
    );
  }
  return sections.join('\n');
}

/** The result as the JSON object's body (camelCase keys; eval-report.ts turns them to snake_case). */
export function privateSpansJson(r: PrivateSpansResult): Record<string, unknown> {
  const { kind: _kind, ...rest } = r;
  return { evaluation: 'private-spans', ...rest };
}
