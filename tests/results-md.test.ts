/**
 * docs/results.md is rendered from the saved --json output under docs/results/ (scripts/results-md.ts): the
 * committed page must be exactly what the committed data renders, and data that lacks a field the page shows
 * must fail the rendering, naming the file and the field, rather than render a page with holes.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readDataFile } from '../scripts/results/data-file.ts';
import { decodeBenchSection, decodePeerBenchSection } from '../scripts/results/bench-sections.ts';
import { provenance } from '../scripts/results/markdown.ts';
import { RESULTS_PAGE, renderResultsPage } from '../scripts/results-md.ts';

const DATA_DIR = 'docs/results';
const made: string[] = [];

/** A copy of the committed data files to break one at a time. */
function dataCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'results-data-'));
  made.push(dir);
  cpSync(DATA_DIR, dir, { recursive: true });
  return dir;
}

/** Rewrites the --json line of one data file. */
function editData(dir: string, name: string, edit: (data: Record<string, any>) => void): string {
  const path = join(dir, `${name}.jsonl`);
  const [header, line] = readFileSync(path, 'utf8').split('\n');
  const data = JSON.parse(line!);
  edit(data);
  writeFileSync(path, `${header}\n${JSON.stringify(data)}\n`);
  return path;
}

afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('docs/results.md', () => {
  test('is what the committed data renders (bun run results)', () => {
    expect(readFileSync(RESULTS_PAGE, 'utf8')).toBe(renderResultsPage(DATA_DIR));
  });

  test('a top-level field the page shows, missing, fails with the file and the field', () => {
    const dir = dataCopy();
    const path = editData(dir, 'demo-bench-shim', (d) => delete d.wire_bytes_per_step);
    expect(() => renderResultsPage(dir)).toThrow(`${path}: "wire_bytes_per_step" is missing or not a number`);
  });

  test('a nested field, missing or of the wrong type, fails with its path', () => {
    const dir = dataCopy();
    const path = editData(dir, 'demo-eval-tinystories', (d) => delete d.teacher_forcing.at_share[1].oracle);
    expect(() => renderResultsPage(dir)).toThrow(`${path}: "teacher_forcing.at_share[1].oracle" is missing or not a number`);
    const path2 = editData(dir, 'truncated-eval-commonsenseqa', (d) => (d.points[0].quality = '0.5'));
    editData(dir, 'demo-eval-tinystories', (d) => (d.teacher_forcing.at_share[1].oracle = 1));
    expect(() => renderResultsPage(dir)).toThrow(`${path2}: "points[0].quality" is missing or not a number`);
  });

  test('a data file without the machine it ran on fails', () => {
    const dir = dataCopy();
    const path = join(dir, 'demo-bench-edge.jsonl');
    const [header, line] = readFileSync(path, 'utf8').split('\n');
    const { machine: _machine, ...rest } = JSON.parse(header!);
    writeFileSync(path, `${JSON.stringify(rest)}\n${line}\n`);
    expect(() => renderResultsPage(dir)).toThrow(`${path}: "machine" is missing or not an object`);
  });

  test('a required measurement without its data file fails; an optional one shows the command that records it', () => {
    const dir = dataCopy();
    rmSync(join(dir, 'qwen2.5-0.5b-bench-edge.jsonl'), { force: true });
    expect(renderResultsPage(dir)).toContain('bun run results:record qwen2.5-0.5b-bench-edge -- bun run bench edge --preset qwen2.5-0.5b --json');
    rmSync(join(dir, 'truncated-eval-commonsenseqa.jsonl'));
    expect(() => renderResultsPage(dir)).toThrow(`${join(dir, 'truncated-eval-commonsenseqa.jsonl')} is missing`);
  });

  test('each measurement names its command, date, CPU, cores and load, from the first line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'results-data-'));
    made.push(dir);
    const header = {
      command: 'bun run bench shim --json',
      date: '2026-11-24T01:29:07.407Z',
      machine: { cpu: 'Some CPU', cores: 2, load_average_start: [10.61, 4.76, 1.88], load_average_end: [9.04, 5.08, 2.03] },
    };
    writeFileSync(join(dir, 'x.jsonl'), `${JSON.stringify(header)}\n{}\n`);
    expect(provenance(readDataFile(dir, 'x'))).toBe(
      '```sh\nbun run bench shim --json\n```\n\n' +
        'Run 2026-11-24 01:29 UTC on Some CPU, 2 cores, load average 10.6 at the start and 9.0 at the end ' +
        '(data: [results/x.jsonl](results/x.jsonl)).',
    );
  });

  test('the decode bench renders from its real --json output (the 0.5B section shows it once measured)', () => {
    // tests/fixtures/results/demo-bench-decode.jsonl: `bun run bench decode --pack models/stories260k-distilled-1l --json`.
    const markdown = decodeBenchSection(readDataFile('tests/fixtures/results', 'demo-bench-decode'));
    expect(markdown).toContain('| decode, ms per token (p90) | 0.85 (68.40), 1179.3 tokens/s |');
    expect(markdown).toContain('| prefill of 100 tokens | 61.9 ms |');
  });

  test('the comparison with llama.cpp renders one row per weight type, ours beside the peer', () => {
    // tests/fixtures/results/decode-peer-shape.jsonl: round figures in the shape `bench decode --peer llama.cpp --json` prints.
    const markdown = decodePeerBenchSection(readDataFile('tests/fixtures/results', 'decode-peer-shape'));
    expect(markdown).toContain('| fp32 / F32 | 50.0 (40.0) | 50.0 (45.0) | 1.25 (0.50–1.50) | 200.0 ms / 500.0 ms |');
    expect(markdown).toContain('| q4 / Q4_0 | 10.0 (9.0) | 10.0 (8.0) | 1.00 (0.75–1.25) | 150.0 ms / 140.0 ms |');
    expect(markdown).toContain('at 2 threads after a 100-token prompt');
    const dir = mkdtempSync(join(tmpdir(), 'results-data-'));
    made.push(dir);
    const [header, line] = readFileSync('tests/fixtures/results/decode-peer-shape.jsonl', 'utf8').split('\n');
    const data = JSON.parse(line!);
    data.peer.pop();
    writeFileSync(join(dir, 'x.jsonl'), `${header}\n${JSON.stringify(data)}\n`);
    expect(() => decodePeerBenchSection(readDataFile(dir, 'x'))).toThrow('"peer[1]" is missing or not an object');
  });
});
