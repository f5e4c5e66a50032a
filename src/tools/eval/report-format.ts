/**
 * The number formats and the Markdown table of `bun run eval`'s printed reports (eval-report.ts,
 * private-spans-report.ts): a value that is not finite prints as –.
 *
 * @example
 * table(['τ', 'routed'], [[f2(0.8), pct(0.358)]]); // '| τ | routed |\n| ---: | ---: |\n| 0.80 | 35.8% |'
 */
export const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '–');
export const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');
export const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)}%` : '–');

export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---:')), ...rows.map(line)].join('\n');
}
