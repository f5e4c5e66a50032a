/**
 * Reads a process's settings once from, in rising precedence, defaults, an optional JSON file
 * (`--config FILE` or `<PREFIX>CONFIG`), environment variables and command-line flags. Every option has one
 * spelling per source, derived from its key: key `backendUrl` is `--backend-url`, `SHIM_BACKEND_URL` and
 * `"backendUrl"` in the file. Values are converted and range-checked here with a message naming their
 * source; each process's config module adds its cross-field checks and freezes the result. Only entry
 * points call this; everything else is handed the config object. An option renamed since a release keeps its
 * old key (`oldKey`) as an alias in every source, so a user's scripts and files keep working.
 *
 * @example
 * const values = loadOptions({ port: { kind: 'int', min: 0, help: 'port' } }, { port: 8080 }, argv, env, 'EDGE_');
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { AppError, errorMessage } from '../errors.ts';

export interface OptionSpec {
  /** A `list` is a repeatable flag; its variable holds one value a line, its file key an array of strings. */
  kind: 'string' | 'int' | 'number' | 'bool' | 'enum' | 'list';
  /** Allowed values of an `enum`. */
  values?: readonly string[];
  /** Lower bound of an `int` or `number`. */
  min?: number;
  /** For an `int`: the word `off` is accepted and stands for this value (a port of -1 = no listener). */
  offValue?: number;
  /** The key this option had before a rename; its flag, variable and file key are still read, below the new name's. */
  oldKey?: string;
  /** What `--help` shows as a `string` or `list` option's value (default VALUE), e.g. KIND=REGEX. */
  valueName?: string;
  help: string;
}

export const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
export const envName = (prefix: string, key: string) => `${prefix}${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;

function coerce(key: string, spec: OptionSpec, raw: unknown, source: string): unknown {
  const bad = (what: string) => new AppError('INVALID_ARGUMENT', `${source}: ${key} ${what}, got ${JSON.stringify(raw)}`);
  switch (spec.kind) {
    case 'string':
      if (typeof raw !== 'string') throw bad('must be a string');
      return raw;
    case 'list':
      if (typeof raw === 'string') return raw.split('\n').filter((line) => line !== '');
      if (!Array.isArray(raw) || !raw.every((item) => typeof item === 'string')) throw bad('must be a string or an array of strings');
      return raw;
    case 'enum':
      if (typeof raw !== 'string' || !spec.values!.includes(raw)) throw bad(`must be one of ${spec.values!.join(', ')}`);
      return raw;
    case 'bool':
      if (typeof raw === 'boolean') return raw;
      if (raw === 'true' || raw === '1') return true;
      if (raw === 'false' || raw === '0') return false;
      throw bad('must be true or false');
    case 'int':
    case 'number': {
      if (spec.offValue !== undefined && raw === 'off') return spec.offValue;
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
      const ok = spec.kind === 'int' ? Number.isSafeInteger(n) : Number.isFinite(n);
      const orOff = spec.offValue === undefined ? '' : ' or off';
      if (!ok || n < (spec.min ?? -Infinity)) throw bad(`must be ${spec.kind === 'int' ? 'an integer' : 'a number'} ≥ ${spec.min ?? '-∞'}${orOff}`);
      return n;
    }
  }
}

function readConfigFile(path: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', `config file ${path}: ${errorMessage(e)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new AppError('INVALID_ARGUMENT', `config file ${path}: must hold a JSON object`);
  }
  return parsed as Record<string, unknown>;
}

/** Merges defaults, config file, environment and flags; throws INVALID_ARGUMENT naming the source. */
export function loadOptions<T extends object>(
  options: Record<keyof T & string, OptionSpec>,
  defaults: T,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  envPrefix: string,
): T {
  const specs = Object.entries(options) as [string, OptionSpec][];
  const flagOptions = Object.fromEntries([
    ['config', { type: 'string' as const }],
    ...specs.flatMap(([key, spec]) =>
      namesOf(key, spec).map((name) => [
        kebab(name),
        { type: spec.kind === 'bool' ? ('boolean' as const) : ('string' as const), multiple: spec.kind === 'list' },
      ]),
    ),
  ]);
  let flags: Record<string, string | boolean | string[] | undefined>;
  try {
    flags = parseArgs({ args: [...argv], options: flagOptions, strict: true, allowPositionals: false }).values as typeof flags;
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', errorMessage(e));
  }
  const configPath = (flags.config as string | undefined) ?? env[`${envPrefix}CONFIG`];
  const file = configPath ? readConfigFile(configPath) : {};
  const fileKeys = new Set(specs.flatMap(([key, spec]) => namesOf(key, spec)));
  for (const key of Object.keys(file)) {
    if (!fileKeys.has(key)) throw new AppError('INVALID_ARGUMENT', `config file ${configPath}: unknown key ${JSON.stringify(key)}`);
  }
  const merged: Record<string, unknown> = { ...(defaults as Record<string, unknown>) };
  for (const [key, spec] of specs) {
    // Old name before new within each source, so the new name wins where both are given.
    const names = namesOf(key, spec).reverse();
    const sources: [unknown, string][] = [
      ...names.map((name): [unknown, string] => [file[name], `config file ${configPath}`]),
      ...names.map((name): [unknown, string] => [env[envName(envPrefix, name)], envName(envPrefix, name)]),
      ...names.map((name): [unknown, string] => [flags[kebab(name)], `--${kebab(name)}`]),
    ];
    for (const [raw, source] of sources) if (raw !== undefined && raw !== '') merged[key] = coerce(key, spec, raw, source);
  }
  return merged as T;
}

/** The option's key and, after it, its key before a rename. */
function namesOf(key: string, spec: OptionSpec): string[] {
  return spec.oldKey === undefined ? [key] : [key, spec.oldKey];
}

/** The `--help` text: every option with its flag, values, help and default. */
export function optionsUsage<T extends object>(options: Record<keyof T & string, OptionSpec>, defaults: T, envPrefix: string, command: string): string {
  const lines = (Object.entries(options) as [string, OptionSpec][]).map(([key, spec]) => {
    const value =
      spec.kind === 'bool'
        ? ''
        : spec.kind === 'enum'
          ? ` ${spec.values!.join('|')}`
          : spec.kind === 'string' || spec.kind === 'list'
            ? ` ${spec.valueName ?? 'VALUE'}${spec.kind === 'list' ? ' (repeatable)' : ''}`
            : spec.offValue !== undefined
              ? ' N|off'
              : ' N';
    const given = (defaults as Record<string, unknown>)[key];
    const fallback = Array.isArray(given) && given.length === 0 ? undefined : given;
    const oldName = spec.oldKey === undefined ? '' : ` (old name: --${kebab(spec.oldKey)}, ${envName(envPrefix, spec.oldKey)})`;
    return `  --${kebab(key)}${value}\n      ${spec.help}${fallback === undefined ? '' : ` (default ${fallback})`}${oldName}`;
  });
  return `usage: ${command} [--config FILE] [flags]

Every flag also reads from ${envPrefix}<NAME> (e.g. --log-level → ${envPrefix}LOG_LEVEL) and from the JSON file's
camelCase key (e.g. "logLevel"); flags win over the environment, which wins over the file.

${lines.join('\n')}`;
}
