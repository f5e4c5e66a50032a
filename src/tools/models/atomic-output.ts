/**
 * Output that appears whole or not at all: everything is written into a sibling temporary folder (or
 * file) that is renamed into place only after the writer finished, so a failure leaves nothing behind.
 * Neither does a stop: while a temporary folder exists, SIGTERM / SIGINT remove it before the process
 * exits (`bun run start` stops its pack builder that way when it is itself stopped during start-up).
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { constants } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';

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

/** A private folder beside `target`, on the same file system so that the final rename is atomic. */
function prepareSibling(target: string): string {
  const parent = dirname(resolve(target));
  try {
    mkdirSync(parent, { recursive: true });
  } catch (e) {
    throw new AppError('PERMISSION_DENIED', `${parent}: cannot create output folder (${errorMessage(e)})`);
  }
  const temp = join(parent, `.${basename(target)}.partial-${process.pid}-${Date.now()}`);
  try {
    mkdirSync(temp);
  } catch (e) {
    throw new AppError('PERMISSION_DENIED', `${parent}: output folder is not writable (${errorMessage(e)})`);
  }
  unfinished.add(temp);
  removeUnfinishedOnSignals();
  return temp;
}

/** Runs `write(tempDir)` and then moves the finished folder to `target`, replacing an older one. */
export async function writeFolderAtomically(target: string, write: (tempDir: string) => Promise<void> | void): Promise<void> {
  const temp = prepareSibling(target);
  try {
    await write(temp);
    const old = `${temp}.old`;
    const replacing = existsSync(target);
    if (replacing) renameSync(target, old);
    try {
      renameSync(temp, target);
    } catch (e) {
      // A failed rebuild leaves the previous folder where it was.
      if (replacing) renameSync(old, target);
      throw e;
    }
    rmSync(old, { recursive: true, force: true });
    unfinished.delete(temp);
  } catch (e) {
    finished(temp);
    throw e;
  }
}

/**
 * Runs `write(tempPath)` (a path inside a private folder), then moves the file and any companions it wrote beside it (e.g. an
 * external data file) next to `target`.
 */
export async function writeFileAtomically(
  target: string,
  write: (tempPath: string) => Promise<string[]> | string[],
): Promise<void> {
  const tempDir = prepareSibling(target);
  try {
    const tempPath = join(tempDir, basename(target));
    const companions = await write(tempPath);
    for (const c of companions) renameSync(join(tempDir, c), join(dirname(resolve(target)), c));
    renameSync(tempPath, resolve(target));
  } finally {
    finished(tempDir);
  }
}
