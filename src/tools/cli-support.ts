/**
 * Shared plumbing for the command-line tools: argument parsing errors and failures become one line on
 * stderr and a non-zero exit code instead of a stack trace; `--help` or `-h` anywhere before a `--` prints
 * the usage and exits 0, for every tool and subcommand that parses its flags here; tools with
 * subcommands (models, router, bench) dispatch them through one table (`runSubcommands`).
 *
 * @example
 * await runSubcommands({ inspect: inspectCommand, demo: demoCommand }, USAGE);
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

/**
 * Flags renamed when the two models got one word each (the edge model and the cloud model, once `slm` and
 * `llm`): a user's scripts keep working, since `parseFlags` reads the old name wherever the new one is declared.
 */
export const OLD_FLAG_NAMES: Readonly<Record<string, string>> = Object.freeze({
  'edge-model': 'slm',
  'edge-model-file': 'slm-file',
  'cloud-model': 'llm',
  'cloud-model-file': 'llm-file',
});

/** Parses `args` strictly; a renamed flag's old name (OLD_FLAG_NAMES) comes back under the new one. */
export function parseFlags<T extends ParseArgsConfig['options']>(args: string[], options: T) {
  if (wantsHelp(args)) throw new HelpRequested();
  const renamed = Object.entries(OLD_FLAG_NAMES).filter(([name]) => options !== undefined && name in options);
  const withOldNames = { ...options, ...Object.fromEntries(renamed.map(([name, old]) => [old, options![name]!])) } as T;
  let parsed;
  try {
    parsed = parseArgs({ args, options: withOldNames, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(errorMessage(e));
  }
  const values = parsed.values as Record<string, unknown>;
  for (const [name, old] of renamed) {
    if (values[old] === undefined) continue;
    if (values[name] !== undefined) throw new UsageError(`--${name} and --${old} (its old name) are both given`);
    values[name] = values[old];
    delete values[old];
  }
  return parsed;
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

/** One subcommand of a tool: what it does with the arguments after its name. */
export type Subcommand = (args: string[]) => Promise<void>;

export interface SubcommandOptions {
  /** What the tool calls its subcommands in errors (`unknown target gpu`); `command` when omitted. */
  noun?: string;
  /** Builds the text `help` prints when it must load modules to do so; `usage` when omitted. */
  help?: () => Promise<string>;
  /** The arguments after the tool's name; process.argv's when omitted. */
  argv?: readonly string[];
}

/**
 * Runs `tool <name> [args]` from `commands`: no name, `help` or `--help` prints the usage (or
 * `options.help()`) and exits 0; an unknown name is a usage error listing the known ones; the command
 * runs under runCli, so its `--help`, usage errors and failures read as every tool's (`usage` printed).
 */
export async function runSubcommands(commands: Record<string, Subcommand>, usage: string, options: SubcommandOptions = {}): Promise<void> {
  const [name, ...args] = options.argv ?? process.argv.slice(2);
  await runCli(async () => {
    if (name === undefined || name === 'help' || name === '--help') {
      console.log(options.help ? await options.help() : usage);
      return;
    }
    const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
    if (!command) throw new UsageError(`unknown ${options.noun ?? 'command'} ${name} (known: ${Object.keys(commands).join(', ')})`);
    await command(args);
  }, usage);
}
