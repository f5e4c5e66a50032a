/**
 * docs/results.md's sections on constrained output: CommonsenseQA answered with the letter held by a choice
 * constraint (`bun run eval --constrain-answer --json`), and what a JSON schema costs the edge
 * (`bun run bench constraint --json`).
 *
 * @example
 * ```ts
 * const markdown = constraintBenchSection(readDataFile('docs/results', 'qwen2.5-0.5b-bench-constraint'));
 * ```
 */
import type { DataFile } from './data-file.ts';
import { packsLine } from './eval-sections.ts';
import { f2, f3, provenance, shortName, table } from './markdown.ts';

const ms = (x: number) => `${f2(x)} ms`;

export function constrainedChoiceSection(file: DataFile): string {
  const d = file.data;
  if (d.str('answer_constraint') !== 'choice') throw new Error(`${file.name}: "answer_constraint" is not "choice": run the eval with --constrain-answer`);
  const points = d.list('points');
  const random = d.obj('baselines').list('random');
  const top1 = d.obj('baselines').list('top1');
  const rows = points.map((p, i) => [
    f2(p.num('threshold')),
    f3(p.num('routed_ratio')),
    f3(p.num('quality')),
    `${p.num('cloud_tokens_replaced')} / ${p.num('constrained_fallbacks')}`,
    f3(random[i]!.num('quality')),
    f3(top1[i]!.num('routed_ratio')),
    f3(top1[i]!.num('quality')),
  ]);
  const noAnswer = Math.max(...points.map((p) => p.num('no_answer_rate')));
  const chance = d.num('chance_accuracy');
  const best = Math.max(...points.map((p) => p.num('quality')), ...random.map((p) => p.num('quality')), ...top1.map((p) => p.num('quality')));
  return [
    provenance(file),
    '',
    packsLine(d),
    '',
    `${d.num('questions')} questions, each answered with one of its letters and nothing else: a \`choice\` constraint holds the ` +
      "edge's tokens and the routed ones alike (the exact-match setting), so accuracy is exact match and the most any τ left " +
      `unanswered is ${f3(noAnswer)}; chance accuracy ${f3(chance)}, the best of any method ${f3(best)}` +
      (best < chance + 0.1 ? ": these story models answer no questions, so the table shows the letter held on both models' tokens, not answer quality" : '') +
      '. "replaced / fallbacks": routed tokens the ' +
      "constraint replaced by an allowed one of the cloud's top-k, and those where none was allowed (the edge's own taken). " +
      'The baselines route the same share of generated tokens as the router:',
    '',
    table(['τ', 'routed', 'accuracy', 'replaced / fallbacks', 'random acc.', 'top-1 routed', 'top-1 acc.'], rows),
  ].join('\n');
}

export function constraintBenchSection(file: DataFile): string {
  const d = file.data;
  const targets = d.obj('targets');
  const byRound = d.obj('tbt_ratio_by_round');
  const verdict = (ok: boolean) => (ok ? 'within' : '**above**');
  return [
    provenance(file),
    '',
    `Edge model \`${shortName(d.str('pack'))}\` (vocabulary ${d.num('vocab_size')}), a ${d.num('schema_properties')}-property JSON ` +
      `schema (every property required; strings, integers, numbers, booleans, an enum, a list). Time between tokens: greedy ` +
      `\`small_only\` generations of ${d.num('tokens_per_run')} tokens, one with the schema and one without, open side by side and ` +
      `stepped in turn (${d.num('rounds')} rounds, the order swapped every round), each token timed as a client sees it; the ` +
      "constraint's own work (the next-token mask, applying it to the logits, the pick) timed alone along the same tokens at an idle box (mean). " +
      'First token: from the request, arriving at an idle box, to its first token, a schema new to the box compiled inside it:',
    '',
    table(
      ['what', 'figure'],
      [
        ['time between tokens, without / with the schema', `${ms(d.num('tbt_ms_free'))} / ${ms(d.num('tbt_ms_schema'))}`],
        ['ratio (median per round, min–max)', `${f3(d.num('tbt_ratio'))} (${f3(byRound.num('median'))}, ${f3(byRound.num('min'))}–${f3(byRound.num('max'))})`],
        [
          'median ratio of paired tokens (one with the schema, one without, a step apart)',
          `${f3(d.num('tbt_ratio_paired'))}; ${verdict(d.num('tbt_ratio_paired') <= targets.num('tbt_ratio'))} the target ≤ ${targets.num('tbt_ratio')}`,
        ],
        ['ratio of the fastest tokens (each side at its quietest moment)', f3(d.num('tbt_ratio_quietest'))],
        ["the constraint's own work per token, and the ratio it implies", `${ms(d.num('mask_ms_per_token'))} (${f3(d.num('tbt_ratio_from_mask'))})`],
        ['a new schema compiled and checked, at an idle box / right after a decode', `${ms(d.num('compile_ms'))} / ${ms(d.num('compile_ms_after_decode'))}`],
        [
          'first token without a schema / with a new one / with a compiled one',
          `${ms(d.num('first_token_ms_free'))} / ${ms(d.num('first_token_ms_new_schema'))} / ${ms(d.num('first_token_ms_compiled_schema'))}`,
        ],
        [
          'what a new schema adds to the first token, its compile included (median per round); a compiled one',
          `${ms(d.num('first_token_extra_ms'))}; ${ms(d.num('first_token_extra_ms_compiled'))}; ${verdict(d.num('first_token_extra_ms') <= targets.num('first_token_extra_ms'))} the target ≤ +${targets.num('first_token_extra_ms')} ms`,
        ],
        [
          "the box's first constrained request made ready: the tokenizer prepared for the compiler (once per box), a schema compiled",
          ms(d.num('first_constraint_ms')),
        ],
      ],
    ),
  ].join('\n');
}
