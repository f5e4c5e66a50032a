/**
 * What `bun run eval` writes besides its report: the plots of `--out DIR` and the `--dump FILE.jsonl`.
 * Both are checked before the evaluation runs (it takes minutes): an existing file is replaced only with
 * `--force`, and only when it is a regular file (output-ownership.ts); a folder `--out` is created when
 * missing and written into, never replaced.
 *
 * @example
 * checkEvalOutputs(options);                          // before runEvaluation
 * await writePlots(options, await evalPlots(result, name));
 */
import { lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, extname, join, resolve } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { writeFileAtomically } from '../models/atomic-output.ts';
import { checkFileOutput, kindOf, type OutputClaim } from '../models/output-ownership.ts';
import type { EvalOptions } from './eval-options.ts';

const claimOf = (o: Pick<EvalOptions, 'force'>, tool: string): OutputClaim => ({ tool, force: o.force });

/** The plots' file-name prefix: --name, else the data set's file name. */
export function plotPrefix(o: Pick<EvalOptions, 'name' | 'dataset'>): string {
  return o.name ?? basename(o.dataset, extname(o.dataset));
}

/** Refuses, before anything runs, a --dump or --out whose existing files the run would have to replace. */
export function checkEvalOutputs(o: Pick<EvalOptions, 'dump' | 'out' | 'name' | 'dataset' | 'force'>): void {
  if (o.dump) checkFileOutput(resolve(o.dump), claimOf(o, 'eval --dump'));
  if (!o.out) return;
  let stats;
  try {
    stats = lstatSync(o.out);
  } catch {
    return;
  }
  if (!stats.isDirectory())
    throw new AppError('ALREADY_EXISTS', `--out ${o.out} is ${kindOf(stats)}, not a folder: eval writes its plots into a folder; name another --out`);
  const prefix = `${plotPrefix(o)}-`;
  const existing = readdirSync(o.out).filter((f) => f.startsWith(prefix) && f.endsWith('.svg'));
  if (existing.length && !o.force) {
    throw new AppError('ALREADY_EXISTS', `--out ${o.out} already holds ${existing.join(', ')}: pass --force to replace them, or another --name`);
  }
}

/** Writes each plot into --out (created when missing); returns the paths written. */
export async function writePlots(o: Pick<EvalOptions, 'out' | 'force'>, plots: Record<string, string>): Promise<string[]> {
  const out = o.out!;
  try {
    mkdirSync(out, { recursive: true });
  } catch (e) {
    throw new AppError('PERMISSION_DENIED', `--out ${out}: cannot create the folder (${errorMessage(e)})`);
  }
  const written: string[] = [];
  for (const [file, svg] of Object.entries(plots)) {
    await writeFileAtomically(join(out, file), claimOf(o, 'eval --out'), (temp) => {
      writeFileSync(temp, svg);
      return [];
    });
    written.push(join(out, file));
  }
  return written;
}
