/**
 * What a request may hold its output to, in one shape for every entry point: a JSON schema (or any JSON
 * object), a grammar in xgrammar's EBNF (which reads llama.cpp's GBNF as it is written), a regular
 * expression, a choice among literal strings, or a structural tag (free text with tool calls that must be
 * valid once opened; chat tools build it). The entry points read their own field names into this shape; the
 * constraint itself never leaves the box (the cloud is only asked for its top-k).
 *
 * @example
 * readConstraint({ jsonSchema: { type: 'object' } }); // { kind: 'json_schema', text: '{"type":"object"}' }
 * readConstraint({ choice: ['A', 'B'] });              // { kind: 'choice', choices: ['A', 'B'], text: '["A","B"]' }
 */
import { AppError } from '../../shared/errors.ts';
import { isRecord } from '../../shared/is-record.ts';
import { unsupportedKeyword } from './schema-keywords.ts';

export type ConstraintKind = 'json_schema' | 'json_object' | 'grammar' | 'regex' | 'choice' | 'structural_tag';

export interface ConstraintSpec {
  kind: ConstraintKind;
  /** The constraint as compiled: schema JSON, grammar or pattern text, the choices' JSON; its cache key with `kind`. */
  text: string;
  /** `choice` only: the strings, one of which the output is. */
  choices?: string[];
  /** How messages name it where its kind would not say (`tools`: a chat's function calls, a structural tag). */
  name?: string;
}

/**
 * The largest constraint accepted, in characters: compile time grows with a schema's or grammar's size,
 * and one compile runs on the edge's only thread, so the size is what bounds it (see COMPILE_LIMIT_MS).
 */
export const MAX_CONSTRAINT_CHARS = 32_768;
/** At most this many choices, each at most this long. */
export const MAX_CHOICES = 256;
export const MAX_CHOICE_CHARS = 1_024;

/** The constraint fields of a request, under the request's own keys (each entry point fills them). */
export interface RawConstraint {
  jsonSchema?: unknown;
  jsonObject?: unknown;
  grammar?: unknown;
  regex?: unknown;
  choice?: unknown;
  structuralTag?: unknown;
  /** A chat's tools as a structural tag (constraint/tool-call-tags.ts builds it). */
  toolCalls?: unknown;
}

/** The documented names, for messages (JSON API and gRPC; the OpenAI adapter names its own). */
const NAMES: Record<keyof RawConstraint, string> = {
  jsonSchema: 'json_schema',
  jsonObject: 'json_object',
  grammar: 'grammar',
  regex: 'regex',
  choice: 'choice',
  structuralTag: 'structural_tag',
  toolCalls: 'tools',
};

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

function bounded(text: string, name: string): string {
  if (text.length > MAX_CONSTRAINT_CHARS) invalid(`${name} is ${text.length} characters; the limit is ${MAX_CONSTRAINT_CHARS}`);
  return text;
}

/** A schema given as an object, or as its JSON text (a page form, a proto string). */
function schemaText(value: unknown, name: string): string {
  let schema: unknown = value;
  if (typeof value === 'string') {
    try {
      schema = JSON.parse(value);
    } catch {
      invalid(`${name} is not valid JSON`);
    }
  }
  if (!isRecord(schema) && schema !== true) invalid(`${name} must be a JSON schema object, got ${JSON.stringify(value)?.slice(0, 80)}`);
  const text = bounded(JSON.stringify(schema), name);
  const unsupported = unsupportedKeyword(schema);
  if (unsupported) invalid(`${name} uses "${unsupported.keyword}" (at ${unsupported.at}), which constrained decoding does not enforce; remove it`);
  return text;
}

function nonEmptyText(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.trim() === '') invalid(`${name} must be a non-empty string`);
  return bounded(value, name);
}

function choicesOf(value: unknown, name: string): string[] {
  // Text (a page form's, a proto's): a JSON list, or one choice a line.
  const list: unknown =
    typeof value !== 'string'
      ? value
      : value.trim().startsWith('[')
        ? JSON.parse(value)
        : value
            .split('\n')
            .map((c) => c.trim())
            .filter((c) => c !== '');
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_CHOICES) invalid(`${name} must be a list of 1 to ${MAX_CHOICES} strings`);
  list.forEach((c: unknown, i) => {
    if (typeof c !== 'string' || c === '' || c.length > MAX_CHOICE_CHARS)
      invalid(`${name}[${i}] must be a non-empty string of at most ${MAX_CHOICE_CHARS} characters`);
  });
  return [...new Set(list as string[])];
}

/** The one constraint a request names, checked for shape and size; undefined when it names none. */
export function readConstraint(raw: RawConstraint): ConstraintSpec | undefined {
  const named = (Object.keys(NAMES) as (keyof RawConstraint)[]).filter((k) => raw[k] !== undefined && raw[k] !== null && raw[k] !== false && raw[k] !== '');
  if (named.length === 0) return undefined;
  if (named.length > 1) invalid(`give at most one of ${named.map((k) => NAMES[k]).join(', ')}: a generation follows one constraint`);
  const key = named[0]!;
  const name = NAMES[key];
  const value = raw[key];
  switch (key) {
    case 'jsonSchema':
      return { kind: 'json_schema', text: schemaText(value, name) };
    case 'jsonObject':
      if (value !== true) invalid(`${name} must be true or absent`);
      return { kind: 'json_object', text: '' };
    case 'grammar':
      return { kind: 'grammar', text: nonEmptyText(value, name) };
    case 'regex':
      return { kind: 'regex', text: nonEmptyText(value, name) };
    case 'choice': {
      let choices: string[];
      try {
        choices = choicesOf(value, name);
      } catch (e) {
        if (e instanceof SyntaxError) invalid(`${name} must be a JSON list of strings`);
        throw e;
      }
      return { kind: 'choice', choices, text: bounded(JSON.stringify(choices), name) };
    }
    case 'structuralTag':
      return { kind: 'structural_tag', text: typeof value === 'string' ? nonEmptyText(value, name) : bounded(JSON.stringify(value), name) };
    case 'toolCalls':
      return { kind: 'structural_tag', text: bounded(JSON.stringify(value), name), name };
  }
}
