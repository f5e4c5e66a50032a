/**
 * The held-out report `router train` ends with (router.json's training.held_out_report, in the `--json`
 * line `bun run results:record` keeps): the trained router against top-1 (`--router builtin`), entropy and
 * random, under teacher forcing and free-running at matched shares, its verdict and the training's time.
 */
import type { DataFile, Fields } from './data-file.ts';
import { f2, f3, pct, provenance, table } from './markdown.ts';
import { countsLoopSteps, decoding, loopCheckCaption, sharedSteps } from '../../src/tools/router/held-out-report.ts';
import type { LoopCheckRow, LoopRun } from '../../src/tools/router/greedy-loop-check.ts';

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
    ...(free.has('greedy_loop_check') ? ['', ...loopCheck(free.list('greedy_loop_check'))] : []),
    '',
    `**Verdict:** ${r.str('verdict')}`,
  ].join('\n');
}

/** A loop check's rows as the report wrote them (the optional counts only where it recorded them). */
function loopRow(row: Fields): LoopCheckRow {
  const run = (key: 'router' | 'random'): LoopRun => {
    const r = row.obj(key);
    const count = (name: string) => (r.has(name) ? { [name]: r.num(name) } : {});
    return {
      tau: r.num('tau'),
      routed_share: r.num('routed_share'),
      rep4: r.num('rep4'),
      stuck: r.num('stuck'),
      ...count('outputs'),
      ...count('loop_steps'),
      ...count('shared_loop_steps'),
    };
  };
  return { share: row.num('share'), router: run('router'), random: run('random') };
}

function loopCheck(fields: Fields[]): string[] {
  const rows = fields.map(loopRow);
  const anatomy = countsLoopSteps(rows);
  return [
    `The loop check, ${loopCheckCaption(rows)}:`,
    '',
    table(
      ['routed', 'trained', 'random', ...(anatomy ? ['loop steps both models take'] : [])],
      rows.map((row) => [
        pct(row.share),
        ...[row.router, row.random].map((run) => `${f3(run.rep4)} [${pct(run.routed_share)}]`),
        ...(anatomy ? [sharedSteps(row.router)] : []),
      ]),
    ),
  ];
}
