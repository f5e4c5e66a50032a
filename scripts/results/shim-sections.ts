/**
 * docs/results.md's sections on the tools through a running shim (docs/bring-your-own-pair.md): what teacher
 * forcing costs through the Score call (`bench scoring`), what it costs the generations the shim serves at
 * the same time (`bench score-flood`), and the same evaluation run twice, the cloud in process and through a
 * shim, side by side, so a reader sees that the path does not move the figures.
 *
 * @example
 * ```ts
 * const markdown = scoringBenchSection(readDataFile('docs/results', 'demo-bench-scoring'));
 * ```
 */
import { readDataFile, type DataFile } from './data-file.ts';
import { f2, f3, pct, provenance, shortName, table } from './markdown.ts';

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

export function scoreFloodBenchSection(file: DataFile): string {
  const d = file.data;
  const alone = d.obj('alone');
  const beside = d.obj('beside_flood');
  const steps = (p: typeof alone) => `${f3(p.num('p50_ms'))} / ${f3(p.num('p99_ms'))} ms (${p.num('steps')} steps, ${p.num('errors')} errors)`;
  return [
    provenance(file),
    '',
    `${d.num('streams')} edge streams of one-token routed steps through one shim (\`${shortName(d.str('pack'))}\`, embedded backend, its own ` +
      `process), alone and beside ${d.num('callers')} callers sending Score calls of full windows (top ${d.num('top_k')}) back to back from ` +
      `another process, in alternating phases of ${d.num('seconds')} s (${d.num('rounds')} rounds). The shim serves routed steps ahead of Score ` +
      'work ([operations.md](operations.md#routed-steps-before-score-work)):',
    '',
    table(
      ['what', 'figure'],
      [
        ['routed step round trip alone, p50 / p99', steps(alone)],
        ['beside the Score flood, p50 / p99', steps(beside)],
        ['p99 beside the flood / alone (target ≤ 2×)', `${f2(d.num('p99_ratio'))}×`],
        [
          'Score calls the flood completed meanwhile',
          `${beside.num('score_calls')} (${beside.num('score_positions')} positions, ${beside.num('score_errors')} failed)`,
        ],
      ],
    ),
  ].join('\n');
}

/** `file` is the evaluation through a shim; `inProcess` names the same run with the cloud pack in process. */
export function throughShimEvalSection(file: DataFile, inProcess: string, dir: string): string {
  const local = readDataFile(dir, inProcess);
  const remote = file.data.obj('teacher_forcing').list('at_share');
  const rows = local.data
    .obj('teacher_forcing')
    .list('at_share')
    .map((row, i) => {
      const other = remote[i]!;
      return [pct(row.num('share')), ...(['router', 'random', 'top1'] as const).flatMap((m) => [pct(row.num(m)), pct(other.num(m))])];
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
