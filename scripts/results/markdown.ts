/**
 * The Markdown pieces of docs/results.md: tables, number formats, and the line under each measurement
 * that says which command made it, when, and on what machine.
 *
 * @example
 * ```ts
 * table(['τ', 'routed'], [['0.70', '0.220']]); // '| τ | routed |\n| ---: | ---: |\n| 0.70 | 0.220 |'
 * f3(0.12345); // '0.123'
 * pct(0.3); // '30.0%'
 * ```
 */
import { basename } from 'node:path';
import type { DataFile } from './data-file.ts';

export const f1 = (x: number) => x.toFixed(1);
export const f2 = (x: number) => x.toFixed(2);
export const f3 = (x: number) => x.toFixed(3);
export const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
/** A value the command reports as null where it does not apply. */
export const orDash = (x: number | null, format: (x: number) => string) => (x === null ? '–' : format(x));

/** A table whose first column is left-aligned and the others, figures, right-aligned. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const rule = header.map((_, i) => (i === 0 ? '---' : '---:'));
  return [line(header), line(rule), ...rows.map(line)].join('\n');
}

/**
 * A pack, router or data set by its folder or file name: the paths in the data are the measuring machine's
 * (a router may come as `onnx:<path>`, its kind first).
 */
export function shortName(path: string): string {
  return basename(path.replace(/^onnx:/, '').replace(/\/+$/, ''));
}

/** `2026-11-24T01:29:07.407Z` → `2026-11-24 01:29 UTC`. */
function utcMinute(iso: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(iso);
  if (!match) throw new Error(`not an ISO date: ${iso}`);
  return `${match[1]} ${match[2]} UTC`;
}

/** The command block and the provenance line that open every measurement. */
export function provenance(file: DataFile): string {
  const p = file.provenance;
  return [
    '```sh',
    p.command,
    '```',
    '',
    `Run ${utcMinute(p.date)} on ${p.cpu}, ${p.cores} cores, load average ${f1(p.loadStart)} at the start and ${f1(p.loadEnd)} ` +
      `at the end (data: [results/${file.name}.jsonl](results/${file.name}.jsonl)).`,
  ].join('\n');
}
