/**
 * The held-out report `router train` ends with (router.json's training.held_out_report, in the `--json`
 * line `bun run results:record` keeps): the trained router against top-1 (`--router builtin`), entropy and
 * random, under teacher forcing and free-running at matched shares, its verdict and the training's time.
 */
import type { DataFile, Fields } from './data-file.ts';
import { f2, f3, pct, provenance, table } from './markdown.ts';
import { decoding } from '../../src/tools/router/held-out-report.ts';

const METHODS = ['router', 'top1', 'entropy', 'random'] as const;

export function routerTrainSection(file: DataFile): string {
  const training = file.data.obj('training');
  const r = training.obj('held_out_report');
  const free = r.obj('free_running');
  const freeRow = (row: Fields) => METHODS.map((m) => `${f2(row.obj(m).num('ppl_cloud'))} (${f3(row.obj(m).num('rep4'))})`);
  return [
    provenance(file),
    '',
    `Trained with \`${training.str('label_rule')}\` labels, ${training.num('members')} members, ${training.list('rounds').length - 1} on-policy rounds ` +
      `in ${f2(file.data.num('seconds') / 60)} minutes, report included. Teacher forcing on ${r.num('documents')} held-out ${r.str('noun')}s ` +
      `(${r.num('positions')} positions), share of the edge→cloud gap recovered:`,
    '',
    table(
      ['routed', 'trained', 'top-1', 'entropy', 'random', 'oracle'],
      r.list('teacher_forced').map((row) => [pct(row.num('share')), ...METHODS.map((m) => pct(row.num(m))), pct(row.num('oracle'))]),
    ),
    '',
    `Free running from ${free.num('prompts')} held-out prompts, ${free.num('max_new_tokens')} tokens each, ${decoding(free.has('temperature') ? free.num('temperature') : undefined)}: the cloud's perplexity of the output (rep4), ` +
      `at matched routed shares; the edge alone ${f2(free.obj('small_only').num('ppl_cloud'))} (${f3(free.obj('small_only').num('rep4'))}), ` +
      `the cloud alone ${f2(free.obj('llm_only').num('ppl_cloud'))} (${f3(free.obj('llm_only').num('rep4'))}):`,
    '',
    table(
      ['routed', 'trained', 'top-1', 'entropy', 'random'],
      free.list('at_share').map((row) => [pct(row.num('share')), ...freeRow(row)]),
    ),
    ...(free.has('greedy_loop_check')
      ? [
          '',
          'The loop check, decoding greedily: rep4 of the trained router, its threshold searched for each share, and of random routing at the share it reached:',
          '',
          table(
            ['routed', 'trained', 'random'],
            free
              .list('greedy_loop_check')
              .map((row) => [
                pct(row.num('share')),
                ...(['router', 'random'] as const).map((m) => `${f3(row.obj(m).num('rep4'))} [${pct(row.obj(m).num('routed_share'))}]`),
              ]),
          ),
        ]
      : []),
    '',
    `**Verdict:** ${r.str('verdict')}`,
  ].join('\n');
}
