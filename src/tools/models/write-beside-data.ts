/**
 * Writing a (patched) model file that keeps referring to the external data of the model it came from.
 * ONNX resolves `location` relative to the model file, so when the new file goes to another folder
 * the data files must be there too: they are hard-linked (no copy, no extra disk) or, across file
 * systems, copied (as a reflink where the file system can). The weights themselves are never rewritten.
 */
import { constants, copyFileSync, existsSync, linkSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize, resolve, sep } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { writeFileAtomically } from './atomic-output.ts';

export interface BesideDataOptions {
  /** The model the data files belong to; their locations are relative to its folder. */
  source: string;
  target: string;
  /** `location` values of the model's external tensors (see `externalDataFiles`). */
  dataFiles: readonly string[];
  /** Replace existing regular files at `target` and beside it (`--force`). */
  force?: boolean;
  /** Writes the model file itself to the given (temporary) path. */
  writeModelFile: (path: string) => void;
}

/** Checks the data files exist before anything is written, so a broken export fails cleanly. */
export function checkDataFiles(source: string, dataFiles: readonly string[]): void {
  for (const f of dataFiles) {
    if (!existsSync(join(dirname(resolve(source)), f))) {
      throw new AppError('NOT_FOUND', `${source}: external data file ${f} is missing`);
    }
  }
}

/**
 * Writes the model atomically to `target`; when `target` is in another folder than `source`, the data
 * files are linked or copied beside it; a same-named file there is replaced only with `force`, as the
 * model file is. Returns the data files that were placed.
 */
export async function writeModelBesideData(options: BesideDataOptions): Promise<string[]> {
  const { source, target, dataFiles } = options;
  const sourceDir = dirname(resolve(source));
  const targetDir = dirname(resolve(target));
  const relocate = dataFiles.length > 0 && !sameFolder(sourceDir, targetDir);
  if (relocate) {
    for (const f of dataFiles) {
      if (isAbsolute(f) || normalize(f).split(sep).includes('..')) {
        throw new AppError('FAILED_PRECONDITION', `${source}: external data location ${f} is outside the model folder, cannot place it beside ${target}`);
      }
    }
  }
  const placed: string[] = [];
  await writeFileAtomically(target, { tool: 'models expose-hidden', force: options.force }, (tempPath) => {
    options.writeModelFile(tempPath);
    if (!relocate) return [];
    const tempDir = dirname(tempPath);
    for (const f of dataFiles) {
      const from = join(sourceDir, f);
      if (sameFile(from, join(targetDir, f))) continue;
      mkdirSync(dirname(join(tempDir, f)), { recursive: true });
      mkdirSync(dirname(join(targetDir, f)), { recursive: true });
      linkOrCopy(from, join(tempDir, f));
      placed.push(f);
    }
    return placed;
  });
  return placed;
}

function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch {
    // Another file system, or links not allowed: a copy (a reflink where supported) instead.
    try {
      copyFileSync(from, to, constants.COPYFILE_FICLONE);
    } catch (e) {
      throw new AppError('PERMISSION_DENIED', `cannot place ${from} beside the output (${errorMessage(e)})`);
    }
  }
}

function sameFolder(a: string, b: string): boolean {
  return existsSync(b) ? realpathSync(a) === realpathSync(b) : a === b;
}

function sameFile(a: string, b: string): boolean {
  if (!existsSync(b)) return false;
  const [sa, sb] = [statSync(a), statSync(b)];
  return sa.ino === sb.ino && sa.dev === sb.dev;
}
