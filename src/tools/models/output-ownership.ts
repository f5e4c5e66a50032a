/**
 * What a tool may replace at its `--out`: only what this project's tools wrote there before, and that only
 * when asked (`--force`). A folder they write carries OUTPUT_MARKER (a small JSON naming the tool); a
 * folder without it, a file, a link, a device or any other special file is never replaced, whatever the
 * flags, since the tool cannot know what it would destroy. An empty folder may be written into (nothing
 * is lost). A file output (a model file, a JSONL dump, a plot) replaces only a regular file, with `--force`.
 *
 * @example
 * checkFolderOutput('models/qwen', { tool: 'models prepare', force: false });
 * // throws ALREADY_EXISTS "--out models/qwen already holds a folder written by models prepare: pass --force to replace it"
 */
import { lstatSync, readdirSync, readFileSync, type Stats, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';

/** The command writing an output, and whether it may replace an earlier output of this project's tools. */
export interface OutputClaim {
  /** As the marker and the errors name it, e.g. `models prepare`. */
  tool: string;
  /** `--force`: replace a folder this project's tools wrote (the marker in it), or a regular file. */
  force?: boolean;
}

/** The marker every folder written through the atomic writer holds. */
export const OUTPUT_MARKER = 'written-by.json';
/** What packs written before the marker existed hold; only this project's tools write it. */
const LEGACY_MARKER = 'pack-source.json';

/** What is at a folder output that may be written: nothing, an empty folder, or a folder written by us. */
export type FolderOutputState = 'absent' | 'empty' | 'ours';

/** Writes the marker into the (temporary) folder about to become the output. */
export function writeOutputMarker(dir: string, tool: string): void {
  writeFileSync(
    join(dir, OUTPUT_MARKER),
    `${JSON.stringify({ tool, note: 'written by this tool: its --force may replace this folder; a folder without this file is never replaced' }, null, 2)}\n`,
  );
}

/** The tool that wrote `dir`, or undefined when no marker says one of ours did. */
export function writerOf(dir: string): string | undefined {
  const marker = join(dir, OUTPUT_MARKER);
  if (isRegularFile(marker)) {
    try {
      const tool = (JSON.parse(readFileSync(marker, 'utf8')) as { tool?: unknown }).tool;
      return typeof tool === 'string' ? tool : "this project's tools";
    } catch {
      return undefined;
    }
  }
  return isRegularFile(join(dir, LEGACY_MARKER)) ? "an earlier version of this project's tools" : undefined;
}

function isRegularFile(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch {
    return false;
  }
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new AppError('PERMISSION_DENIED', `--out ${path}: cannot be examined (${errorMessage(e)})`);
  }
}

/** What kind of thing `stats` is, in words, for the refusals. */
export function kindOf(stats: Stats): string {
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isFile()) return 'a file';
  if (stats.isDirectory()) return 'a folder';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'a device';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSocket()) return 'a socket';
  return 'a special file';
}

/**
 * Whether the folder output `target` (an absolute path) may be written, and what is there; throws naming
 * the path and what `--force` would (or would not) do.
 */
export function checkFolderOutput(target: string, claim: OutputClaim): FolderOutputState {
  const stats = lstatOrUndefined(target);
  if (!stats) return 'absent';
  if (!stats.isDirectory()) {
    throw new AppError(
      'ALREADY_EXISTS',
      `--out ${target} is ${kindOf(stats)}: ${claim.tool} writes a folder there and replaces only a folder this project's tools wrote, never ${kindOf(stats)}, even with --force; name another --out`,
    );
  }
  if (readdirSync(target).length === 0) return 'empty';
  const writer = writerOf(target);
  if (writer === undefined) {
    throw new AppError(
      'ALREADY_EXISTS',
      `--out ${target} is a folder this project's tools did not write (no ${OUTPUT_MARKER} in it): ${claim.tool} never replaces it, even with --force; name a new or empty folder`,
    );
  }
  if (!claim.force) throw new AppError('ALREADY_EXISTS', `--out ${target} already holds a folder written by ${writer}: pass --force to replace it`);
  return 'ours';
}

/** Whether the file output `target` (an absolute path) may be written: nothing there, or a regular file with `force`. */
export function checkFileOutput(target: string, claim: OutputClaim): void {
  const stats = lstatOrUndefined(target);
  if (!stats) return;
  if (!stats.isFile()) {
    throw new AppError(
      'ALREADY_EXISTS',
      `${target} is ${kindOf(stats)}: ${claim.tool} writes a file there and replaces only a regular file, never ${kindOf(stats)}, even with --force; name another path`,
    );
  }
  if (!claim.force) throw new AppError('ALREADY_EXISTS', `${target} already exists: pass --force to replace it`);
}
