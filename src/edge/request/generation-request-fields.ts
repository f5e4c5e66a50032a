/**
 * The request schema every entry point shares: the documented field names (snake_case, as users of
 * llama.cpp- and OpenAI-style APIs expect, and as the proto spells them) and how each encoding writes
 * their values. JSON bodies and gRPC messages carry typed values (a number must be a number); page forms
 * carry text (a number must be a decimal string, nothing looser). Unknown names, camelCase spellings
 * included, are refused with a message naming them: one spelling per field keeps the API, its error
 * messages and its documentation saying the same thing, and a silently ignored `max_new_tokens` (the bug
 * this replaces) cannot happen again. The result goes to `parseGenerationRequest`, which checks ranges.
 *
 * @example
 * readGenerationRequest({ prompt: 'Once', max_new_tokens: 8 }, 'typed'); // { prompt: 'Once', maxNewTokens: 8 }
 * readGenerationRequest({ prompt: 'Once', max_new_tokens: '8' }, 'form'); // the same
 * readGenerationRequest({ prompt: 'Once', maxNewTokens: 8 }, 'typed');
 * // throws INVALID_ARGUMENT: unknown field "maxNewTokens" (did you mean "max_new_tokens"?); the fields are prompt, mode, ...
 */
import { AppError } from '../../shared/errors.ts';
import { DECIMAL_NUMBER } from '../../shared/number-text.ts';
import type { RawGenerationRequest } from './generation-request.ts';
import type { RawConstraint } from '../constraint/constraint-spec.ts';

/** The constraint fields: documented name → key of the request's `constraint` (constraint-spec.ts checks them). */
const CONSTRAINT_FIELDS = new Map<string, keyof RawConstraint>([
  ['json_schema', 'jsonSchema'],
  ['grammar', 'grammar'],
  ['regex', 'regex'],
  ['choice', 'choice'],
]);

/** Documented name → the request's own key, and what kind of value it takes. */
const FIELDS = new Map<string, { key: keyof RawGenerationRequest; kind: 'text' | 'number' | 'texts' | 'boolean' | 'spans' }>([
  ['prompt', { key: 'prompt', kind: 'text' }],
  ['mode', { key: 'mode', kind: 'text' }],
  ['threshold', { key: 'threshold', kind: 'number' }],
  ['max_new_tokens', { key: 'maxNewTokens', kind: 'number' }],
  ['temperature', { key: 'temperature', kind: 'number' }],
  ['top_p', { key: 'topP', kind: 'number' }],
  ['seed', { key: 'seed', kind: 'number' }],
  ['stop', { key: 'stop', kind: 'texts' }],
  ['route_span', { key: 'routeSpan', kind: 'number' }],
  ['route_share', { key: 'routeShare', kind: 'number' }],
  ['route_tokens_per_minute', { key: 'routeTokensPerMinute', kind: 'number' }],
  ['route_wait_ms', { key: 'routeWaitMs', kind: 'number' }],
  ['speculate', { key: 'speculate', kind: 'boolean' }],
  ['conversation', { key: 'conversation', kind: 'text' }],
  ['private_spans', { key: 'privateSpans', kind: 'spans' }],
  ['private_detect', { key: 'privateDetect', kind: 'texts' }],
  ['logprobs', { key: 'logprobs', kind: 'number' }],
]);

export const REQUEST_FIELD_NAMES: readonly string[] = [...FIELDS.keys(), ...CONSTRAINT_FIELDS.keys()];

/**
 * `typed`: JSON and protobuf, where a number is a number. `form`: application/x-www-form-urlencoded,
 * where every value is text and a field may repeat.
 */
export type RequestEncoding = 'typed' | 'form';

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

/** `maxNewTokens` → `max_new_tokens`, to point a camelCase spelling at the documented one. */
function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function refuseUnknown(names: string[]): void {
  const unknown = names.filter((n) => !FIELDS.has(n) && !CONSTRAINT_FIELDS.has(n));
  if (unknown.length === 0) return;
  const described = unknown.map((n) => (FIELDS.has(snakeCase(n)) ? `"${n}" (did you mean "${snakeCase(n)}"?)` : JSON.stringify(n)));
  invalid(`unknown field${unknown.length > 1 ? 's' : ''} ${described.join(', ')}; the fields are ${REQUEST_FIELD_NAMES.join(', ')}`);
}

function formNumber(name: string, text: string): number | undefined {
  // An empty number input submits "": the field was left blank, so the default applies.
  if (text === '') return undefined;
  if (!DECIMAL_NUMBER.test(text)) invalid(`${name} must be a number, got ${JSON.stringify(text)}`);
  return Number(text);
}

function typedNumber(name: string, value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number') invalid(`${name} must be a number, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * A form's boolean: what a checkbox (`on`) or a select of `on`/`off` submits, or the words themselves.
 * The speculate select also offers `auto`: the edge decides from its measured figures.
 */
function formSwitch(name: string, text: string): boolean | 'auto' | undefined {
  if (text === '') return undefined;
  if (text === 'on' || text === 'true') return true;
  if (text === 'off' || text === 'false') return false;
  if (text === 'auto' && name === 'speculate') return 'auto';
  return invalid(`${name} must be on${name === 'speculate' ? ', off or auto' : ' or off'}, got ${JSON.stringify(text)}`);
}

function typedBoolean(name: string, value: unknown): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') invalid(`${name} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * Spans in a form: the JSON of the list (the page writes it from a selection); blank is none. `of` names
 * the text they point into, where it is not the prompt (a chat message).
 */
export function formSpans(name: string, text: string, of = ''): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return invalid(`${name} must be a JSON list of [start, end] code-point ranges${of}, got ${JSON.stringify(text.slice(0, 80))}`);
  }
}

/** One value of a form field: a repeated field is refused unless it is a list (`stop`). */
function single(name: string, value: unknown): unknown {
  if (Array.isArray(value)) invalid(`${name} is given ${value.length} times; give it once`);
  return value;
}

/**
 * Reads the documented fields of one request body into the request's own keys, with numbers as
 * numbers. Refuses unknown fields and loosely written numbers; ranges are `parseGenerationRequest`'s.
 */
export function readGenerationRequest(body: Record<string, unknown>, encoding: RequestEncoding): RawGenerationRequest {
  refuseUnknown(Object.keys(body));
  const raw: RawGenerationRequest = {};
  const constraint: RawConstraint = {};
  for (const [name, value] of Object.entries(body)) {
    const constraintKey = CONSTRAINT_FIELDS.get(name);
    if (constraintKey) {
      // A form's blank field is no constraint; text is read as JSON or lines where the field takes a list.
      if (value !== '') constraint[constraintKey] = encoding === 'form' ? single(name, value) : value;
      continue;
    }
    const { key, kind } = FIELDS.get(name)!;
    if (kind === 'texts') raw[key] = value;
    else if (kind === 'spans') raw[key] = encoding === 'form' ? formSpans(name, single(name, value) as string) : value;
    else if (encoding === 'form') {
      const text = single(name, value);
      raw[key] = kind === 'number' ? formNumber(name, text as string) : kind === 'boolean' ? formSwitch(name, text as string) : text;
    } else raw[key] = kind === 'number' ? typedNumber(name, value) : kind === 'boolean' ? typedBoolean(name, value) : value;
  }
  if (Object.keys(constraint).length > 0) raw.constraint = constraint;
  return raw;
}
