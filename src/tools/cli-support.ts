/**
 * Shared plumbing for the command-line tools: argument parsing errors and failures become one line on
 * stderr and a non-zero exit code instead of a stack trace; `--help` or `-h` anywhere before a `--` prints
 * the usage and exits 0, for every tool and subcommand that parses its flags here.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AppError, errorMessage } from '../shared/errors.ts';
import { parseDecimal } from '../shared/number-text.ts';

export class UsageError extends Error {}

/** `--help` was asked for: runCli prints the usage to stdout and exits 0. */
export class HelpRequested extends Error {
  constructor() {
    super('help requested');
  }
}

/** Whether `args` ask for help (`--help` or `-h` before a `--` that ends the flags). */
export function wantsHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export function parseFlags<T extends ParseArgsConfig['options']>(args: string[], options: T) {
  if (wantsHelp(args)) throw new HelpRequested();
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(errorMessage(e));
  }
}

export function requireFlag(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

/**
 * A number flag's value, `fallback` when absent; with `range`, a given value must lie in [min, max]. The
 * text is read with the edge's own grammar for numbers (number-text.ts): `0x10` or ` 8 ` are refused.
 */
export function numberFlag(values: Record<string, unknown>, name: string, fallback?: number, range?: readonly [number, number]): number | undefined {
  const v = values[name];
  if (v === undefined) return fallback;
  const n = typeof v === 'string' ? parseDecimal(v) : undefined;
  if (n === undefined) throw new UsageError(`--${name} must be a number, got ${JSON.stringify(v)}`);
  if (range && (n < range[0] || n > range[1])) throw new UsageError(`--${name} must be in [${range[0]}, ${range[1]}], got ${n}`);
  return n;
}

/** An integer flag's value, `fallback` when absent; with `range`, a given value must lie in [min, max]. */
export function integerFlag(values: Record<string, unknown>, name: string, fallback?: number, range?: readonly [number, number]): number | undefined {
  const v = values[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !/^-?\d+$/.test(v)) throw new UsageError(`--${name} must be an integer, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (range && (n < range[0] || n > range[1])) throw new UsageError(`--${name} must be in [${range[0]}, ${range[1]}], got ${n}`);
  return n;
}

/** Runs a CLI's main function; prints `error: ...` (and usage for usage errors) and exits non-zero. */
export async function runCli(main: () => Promise<void>, usage: string): Promise<void> {
  try {
    await main();
  } catch (e) {
    if (e instanceof HelpRequested) {
      console.log(usage);
      process.exit(0);
    }
    if (e instanceof UsageError) {
      console.error(`error: ${e.message}\n\n${usage}`);
      process.exit(2);
    }
    console.error(`error: ${e instanceof AppError ? e.message : errorMessage(e)}`);
    process.exit(1);
  }
}
