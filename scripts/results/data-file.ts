/**
 * The data files docs/results.md is rendered from: docs/results/NAME.jsonl, whose first line names the
 * command, the date and the machine (scripts/record-result.ts writes it) and whose second line is the
 * command's `--json` output as it printed it. Reading a field that is missing, or of the wrong type, throws
 * with the file and the field's path, so a page cannot be rendered from data that lacks what it shows.
 *
 * @example
 * ```ts
 * const file = readDataFile('docs/results', 'demo-bench-shim');
 * file.data.num('wire_bytes_per_step'); // 26
 * file.data.num('no_such_field');       // throws: docs/results/demo-bench-shim.jsonl: "no_such_field" is missing or not a number
 * ```
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A JSON value read through its path, for errors that say which field of which file is wrong. */
export class Fields {
  constructor(
    readonly file: string,
    private readonly value: unknown,
    private readonly path = '',
  ) {}

  private child(key: string | number): { value: unknown; path: string } {
    const path = typeof key === 'number' ? `${this.path}[${key}]` : this.path ? `${this.path}.${key}` : key;
    const record = this.value as Record<string | number, unknown> | null;
    return { value: record !== null && typeof record === 'object' ? record[key] : undefined, path };
  }

  private fail(path: string, what: string): never {
    throw new Error(`${this.file}: "${path}" is missing or not ${what}`);
  }

  num(key: string): number {
    const { value, path } = this.child(key);
    return typeof value === 'number' && Number.isFinite(value) ? value : this.fail(path, 'a number');
  }

  /** Whether the key is there at all: a figure older recordings do not have. */
  has(key: string): boolean {
    return this.child(key).value !== undefined;
  }

  /** A number, or null where the command writes null for "not applicable". */
  numOrNull(key: string): number | null {
    const { value, path } = this.child(key);
    if (value === null) return null;
    return typeof value === 'number' && Number.isFinite(value) ? value : this.fail(path, 'a number or null');
  }

  str(key: string): string {
    const { value, path } = this.child(key);
    return typeof value === 'string' ? value : this.fail(path, 'a string');
  }

  /** A string, or null where the command wrote none (a field added after older recordings). */
  strOrNull(key: string): string | null {
    const { value, path } = this.child(key);
    if (value === null || value === undefined) return null;
    return typeof value === 'string' ? value : this.fail(path, 'a string or nothing');
  }

  bool(key: string): boolean {
    const { value, path } = this.child(key);
    return typeof value === 'boolean' ? value : this.fail(path, 'true or false');
  }

  boolOrNull(key: string): boolean | null {
    const { value, path } = this.child(key);
    if (value === null) return null;
    return typeof value === 'boolean' ? value : this.fail(path, 'true, false or null');
  }

  obj(key: string): Fields {
    const { value, path } = this.child(key);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? new Fields(this.file, value, path) : this.fail(path, 'an object');
  }

  /** A non-empty list of numbers. */
  numList(key: string): number[] {
    const { value, path } = this.child(key);
    if (!Array.isArray(value) || value.length === 0 || !value.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      this.fail(path, 'a non-empty list of numbers');
    }
    return value as number[];
  }

  /** A non-empty list of strings. */
  strList(key: string): string[] {
    const { value, path } = this.child(key);
    if (!Array.isArray(value) || value.length === 0 || !value.every((x) => typeof x === 'string')) this.fail(path, 'a non-empty list of strings');
    return value as string[];
  }

  /** A non-empty array's items: every table row needs at least one to say anything. */
  list(key: string): Fields[] {
    const { value, path } = this.child(key);
    if (!Array.isArray(value) || value.length === 0) this.fail(path, 'a non-empty list');
    return value.map((item, i) => new Fields(this.file, item, `${path}[${i}]`));
  }
}

/** What made a data file's figures: the first line. */
export interface RunProvenance {
  command: string;
  date: string;
  cpu: string;
  cores: number;
  loadStart: number;
  loadEnd: number;
}

export interface DataFile {
  name: string;
  provenance: RunProvenance;
  data: Fields;
}

/** The path of a data file, relative to the repository root. */
export function dataFilePath(dir: string, name: string): string {
  return join(dir, `${name}.jsonl`);
}

export function hasDataFile(dir: string, name: string): boolean {
  return existsSync(dataFilePath(dir, name));
}

function parseLine(path: string, line: string | undefined, which: string): unknown {
  if (!line) throw new Error(`${path}: the ${which} line is missing`);
  try {
    return JSON.parse(line);
  } catch (error) {
    throw new Error(`${path}: the ${which} line is not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
}

/** Reads and checks one data file; throws if it is missing or its first line lacks a field. */
export function readDataFile(dir: string, name: string): DataFile {
  const path = dataFilePath(dir, name);
  if (!existsSync(path)) throw new Error(`${path} is missing (scripts/record-result.ts writes it)`);
  const [first, second] = readFileSync(path, 'utf8').split('\n');
  const header = new Fields(path, parseLine(path, first, 'first (command, date, machine)'));
  const machine = header.obj('machine');
  const provenance: RunProvenance = {
    command: header.str('command'),
    date: header.str('date'),
    cpu: machine.str('cpu'),
    cores: machine.num('cores'),
    // The 1-minute figure: the one that describes the run itself.
    loadStart: machine.numList('load_average_start')[0]!,
    loadEnd: machine.numList('load_average_end')[0]!,
  };
  return { name, provenance, data: new Fields(path, parseLine(path, second, 'second (the --json output)')) };
}
