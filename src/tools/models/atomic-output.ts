/**
 * Output that appears whole or not at all: everything is written into a sibling temporary folder (or
 * file) that is renamed into place only after the writer finished, so a failure leaves nothing behind.
 * What was at the output before is replaced only when it is ours to replace (output-ownership.ts).
 * Neither does a stop: while a temporary folder exists, SIGTERM / SIGINT remove it before the process
 * exits (`bun run start` stops its pack builder that way when it is itself stopped during start-up).
 */
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { constants } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { checkFileOutput, checkFolderOutput, writeOutputMarker, type OutputClaim } from './output-ownership.ts';

/** Temporary folders not yet renamed into place or removed. */
const unfinished = new Set<string>();
let signalsHandled = false;

function removeUnfinishedOnSignals(): void {
  if (signalsHandled) return;
  signalsHandled = true;
  const onSignal = (signal: NodeJS.Signals) => {
    for (const temp of unfinished) rmSync(temp, { recursive: true, force: true });
    process.exit(128 + (constants.signals[signal] ?? 0));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

function finished(temp: string): void {
  rmSync(temp, { recursive: true, force: true });
  unfinished.delete(temp);
}

/** A private folder beside `target` (absolute), on the same file system so that the final rename is atomic. */
function prepareSibling(target: string): string {
  const parent = dirname(target);
  try {
    mkdirSync(parent, { recursive: true });
  } catch (e) {
    throw new AppError('PERMISSION_DENIED', `--out ${target}: its folder ${parent} does not exist and cannot be created (${errorMessage(e)})`);
  }
  const temp = join(parent, `.${basename(target)}.partial-${process.pid}-${Date.now()}`);
  try {
    mkdirSync(temp);
  } catch (e) {
    throw new AppError('PERMISSION_DENIED', `--out ${target}: its folder ${parent} is not writable (${errorMessage(e)})`);
  }
  unfinished.add(temp);
  removeUnfinishedOnSignals();
  return temp;
}

/** A rename into `target` that failed, said in words: something appeared there meanwhile, or the folder refuses it. */
function renameInto(from: string, target: string): void {
  try {
    renameSync(from, target);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const appeared = code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR';
    throw new AppError(
      appeared ? 'ALREADY_EXISTS' : 'PERMISSION_DENIED',
      appeared
        ? `--out ${target}: something else appeared there while it was being written; it is left as it is`
        : `--out ${target}: cannot move the output into place (${errorMessage(e)})`,
    );
  }
}

/**
 * Runs `write(tempDir)` and then moves the finished folder to `target`. What is at `target` is checked
 * before anything is written and again before the move (checkFolderOutput): nothing, an empty folder, or
 * (with `claim.force`) a folder this project's tools wrote, which is then replaced. The folder gets the
 * marker naming `claim.tool`.
 */
export async function writeFolderAtomically(out: string, claim: OutputClaim, write: (tempDir: string) => Promise<void> | void): Promise<void> {
  const target = resolve(out);
  checkFolderOutput(target, claim);
  const temp = prepareSibling(target);
  try {
    await write(temp);
    writeOutputMarker(temp, claim.tool);
    if (checkFolderOutput(target, claim) === 'ours') replaceOurs(temp, target);
    else renameInto(temp, target);
    unfinished.delete(temp);
  } catch (e) {
    finished(temp);
    throw e;
  }
}

/** Moves the earlier output aside, the new one into place, then removes the earlier one (it holds our marker). */
function replaceOurs(temp: string, target: string): void {
  const old = `${temp}.old`;
  renameSync(target, old);
  try {
    renameInto(temp, target);
  } catch (e) {
    // A failed rebuild leaves the previous folder where it was.
    renameSync(old, target);
    throw e;
  }
  rmSync(old, { recursive: true, force: true });
}

/**
 * Runs `write(tempPath)` (a path inside a private folder), then moves the file and any companions it wrote beside it (e.g. an
 * external data file) next to `target`. Each may replace only a regular file, with `claim.force` (checkFileOutput).
 */
export async function writeFileAtomically(out: string, claim: OutputClaim, write: (tempPath: string) => Promise<string[]> | string[]): Promise<void> {
  const target = resolve(out);
  checkFileOutput(target, claim);
  const tempDir = prepareSibling(target);
  try {
    const tempPath = join(tempDir, basename(target));
    const companions = await write(tempPath);
    for (const c of companions) {
      const placed = join(dirname(target), c);
      checkFileOutput(placed, claim);
      renameInto(join(tempDir, c), placed);
    }
    checkFileOutput(target, claim);
    renameInto(tempPath, target);
  } finally {
    finished(tempDir);
  }
}
