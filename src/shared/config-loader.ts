/**
 * Reads a process's settings once from, in rising precedence, defaults, an optional JSON config file
 * (`--config FILE` or the `<PREFIX>CONFIG` variable), environment variables and command-line flags.
 * Each setting is declared once with its flag, variable, type and help text; values are converted and
 * checked here, and the result is frozen. Only entry points call this; everything else gets the object.
 *
 * @example
 * const values = loadSettings({ port: { type: 'integer', default: 8080, help: 'HTTP port' } }, argv, env, 'EDGE_');
 * // --port 9000, EDGE_PORT=9000 or {"port": 9000} in the config file
 */
import { parseArgs } from 'node:util';
import { AppError, errorMessage } from './errors.ts';
import { readJsonFile } from './model-pack.ts';

type SettingType = 'string' | 'integer' | 'number' | 'boolean' | 'list';

export interface SettingSpec {
  type: SettingType;
  default?: string | number | boolean | string[];
  help: string;
}

type ValueOf<S extends SettingSpec> = S['type'] extends 'integer' | 'number'
  ? number
  : S['type'] extends 'boolean'
    ? boolean
    : S['type'] extends 'list'
      ? string[]
      : string;

export type Settings<T extends Record<string, SettingSpec>> = {
  readonly [K in keyof T]: T[K]['default'] extends undefined ? ValueOf<T[K]> | undefined : ValueOf<T[K]>;
};

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (prefix: string, name: string) => prefix + kebab(name).replace(/-/g, '_').toUpperCase();

function convert(spec: SettingSpec, raw: unknown, where: string): string | number | boolean | string[] {
  const bad = (what: string): never => {
    throw new AppError('INVALID_ARGUMENT', `${where} must be ${what}, got ${JSON.stringify(raw)}`);
  };
  switch (spec.type) {
    case 'string':
      return typeof raw === 'string' ? raw : bad('a string');
    case 'list':
      if (Array.isArray(raw) && raw.every((v) => typeof v === 'string')) return raw;
      return typeof raw === 'string' ? raw.split(',').map((s) => s.trim()).filter(Boolean) : bad('a comma-separated list');
    case 'boolean':
      if (typeof raw === 'boolean') return raw;
      if (raw === 'true' || raw === '1') return true;
      if (raw === 'false' || raw === '0') return false;
      return bad('true or false');
    case 'integer':
    case 'number': {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
      if (!Number.isFinite(n) || (spec.type === 'integer' && !Number.isInteger(n))) bad(spec.type === 'integer' ? 'an integer' : 'a number');
      return n;
    }
  }
}

export function loadSettings<T extends Record<string, SettingSpec>>(
  specs: T,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  envPrefix: string,
): Settings<T> {
  const options = Object.fromEntries(
    Object.entries(specs).map(([name, s]) => [kebab(name), { type: s.type === 'boolean' ? ('boolean' as const) : ('string' as const) }]),
  );
  let flags: Record<string, unknown>;
  try {
    flags = parseArgs({ args: [...argv], options: { ...options, config: { type: 'string' } }, strict: true, allowPositionals: false }).values;
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', errorMessage(e));
  }
  const configFile = (flags.config as string | undefined) ?? env[`${envPrefix}CONFIG`];
  const file = configFile ? (readJsonFile(configFile) as Record<string, unknown>) : {};
  if (typeof file !== 'object' || file === null || Array.isArray(file)) {
    throw new AppError('INVALID_ARGUMENT', `${configFile}: the config file must hold a JSON object`);
  }
  for (const key of Object.keys(file)) {
    if (!(key in specs)) throw new AppError('INVALID_ARGUMENT', `${configFile}: unknown setting ${key}`);
  }
  const values: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(specs)) {
    const flag = flags[kebab(name)];
    const variable = env[envName(envPrefix, name)];
    if (flag !== undefined) values[name] = convert(spec, flag, `--${kebab(name)}`);
    else if (variable !== undefined && variable !== '') values[name] = convert(spec, variable, envName(envPrefix, name));
    else if (name in file) values[name] = convert(spec, file[name], `${configFile}: ${name}`);
    else values[name] = spec.default;
  }
  return Object.freeze(values) as Settings<T>;
}

/** Help text listing every setting with its flag, variable and default. */
export function settingsHelp(specs: Record<string, SettingSpec>, envPrefix: string): string {
  return Object.entries(specs)
    .map(([name, s]) => {
      const def = s.default === undefined ? '' : ` (default ${JSON.stringify(s.default)})`;
      return `  --${kebab(name)}${s.type === 'boolean' ? '' : ' <' + s.type + '>'}  ${envName(envPrefix, name)}\n      ${s.help}${def}`;
    })
    .join('\n');
}
