/**
 * docs/results.md's sections on the tools through a running shim (docs/bring-your-own-pair.md): what teacher
 * forcing costs through the Score call (`bench scoring`), and the same evaluation run twice, the cloud in
 * process and through a shim, side by side, so a reader sees that the path does not move the figures.
 *
 * @example
 * ```ts
 * const markdown = scoringBenchSection(readDataFile('docs/results', 'demo-bench-scoring'));
 * ```
 */
import { readDataFile, type DataFile } from './data-file.ts';
import { f2, f3, pct, provenance, table } from './markdown.ts';

export function scoringBenchSection(file: DataFile): string {
  const d = file.data;
  return [
    provenance(file),
    '',
    `Teacher forcing of the demo pair over ${d.num('documents')} TinyStories documents (${d.num('positions')} positions), the cloud model in ` +
      'this process and through a shim on loopback (embedded backend) answering Score calls, in alternating rounds (median of ' +
      `${d.num('rounds')}):`,
    '',
    table(
      ['what', 'figure'],
      [
        ['cloud in process', `${f3(d.num('in_process_s'))} s`],
        ['through the shim', `${f3(d.num('through_shim_s'))} s, ${f2(d.num('ratio'))}× (target ≤ 2×)`],
        ['Score calls per round, windows in the documents', `${d.num('score_calls_per_round')}, ${d.num('windows')} (one call per window)`],
      ],
    ),
  ].join('\n');
}

/** `file` is the evaluation through a shim; `inProcess` names the same run with the cloud pack in process. */
export function throughShimEvalSection(file: DataFile, inProcess: string, dir: string): string {
  const local = readDataFile(dir, inProcess);
  const remote = file.data.obj('teacher_forcing').list('at_share');
  const rows = local.data.obj('teacher_forcing').list('at_share').map((row, i) => {
    const other = remote[i]!;
    return [
      pct(row.num('share')),
      ...(['router', 'random', 'top1'] as const).flatMap((m) => [pct(row.num(m)), pct(other.num(m))]),
    ];
  });
  return [
    provenance(local),
    '',
    provenance(file),
    '',
    'Recovered fraction of the edge→cloud accuracy gap at fixed routed shares (teacher forcing), in process | through the shim:',
    '',
    table(['share', 'router', '(shim)', 'random', '(shim)', 'top-1', '(shim)'], rows),
  ].join('\n');
}
