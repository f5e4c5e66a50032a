/**
 * The OpenAI API's ways to constrain the output, read into the edge's constraint fields (constraint/):
 * OpenAI's `response_format` (`text`, `json_object`, `json_schema` with `schema` and `strict`), vLLM's
 * `structured_outputs` (`json`, `regex`, `choice`, `grammar`, `json_object`, `structural_tag`) and its older
 * top-level names (`guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`). At most one of them
 * per request; the checks of each value's shape and size are constraint-spec.ts's, named here OpenAI's way.
 *
 * @example
 * readOpenAIConstraint(fields); // { jsonSchema: { type: 'object', ... } } from response_format.json_schema.schema
 */
import { isRecord } from '../../../shared/is-record.ts';
import type { RawConstraint } from '../../constraint/constraint-spec.ts';
import { OpenAIParamError } from './openai-errors.ts';
import { show, type OpenAIFields } from './openai-fields.ts';

/** vLLM's top-level names (its older API), and the constraint key each fills. */
const GUIDED: Record<string, keyof RawConstraint> = {
  guided_json: 'jsonSchema',
  guided_regex: 'regex',
  guided_choice: 'choice',
  guided_grammar: 'grammar',
};

/** vLLM's `structured_outputs` keys. */
const STRUCTURED: Record<string, keyof RawConstraint> = {
  json: 'jsonSchema',
  regex: 'regex',
  choice: 'choice',
  grammar: 'grammar',
  json_object: 'jsonObject',
  structural_tag: 'structuralTag',
};

export const CONSTRAINT_FIELDS = ['response_format', 'structured_outputs', ...Object.keys(GUIDED)];

function fromResponseFormat(value: unknown): { param: string; raw: RawConstraint } | undefined {
  if (!isRecord(value) || typeof value.type !== 'string')
    throw new OpenAIParamError('response_format', `response_format must be an object with a type, got ${show(value)}`);
  if (value.type === 'text') return undefined;
  if (value.type === 'json_object') return { param: 'response_format', raw: { jsonObject: true } };
  if (value.type !== 'json_schema')
    throw new OpenAIParamError('response_format.type', `response_format.type must be text, json_object or json_schema, got ${show(value.type)}`);
  const format = value.json_schema;
  if (!isRecord(format) || !isRecord(format.schema)) {
    throw new OpenAIParamError(
      'response_format.json_schema',
      'response_format.json_schema must be an object with a schema (and optionally name, description, strict)',
    );
  }
  if (format.strict !== undefined && format.strict !== null && typeof format.strict !== 'boolean') {
    throw new OpenAIParamError('response_format.json_schema.strict', `response_format.json_schema.strict must be a boolean, got ${show(format.strict)}`);
  }
  // Strict or not, the output is held to the schema on every token: `strict` asks for no less.
  return { param: 'response_format.json_schema.schema', raw: { jsonSchema: format.schema } };
}

function fromStructuredOutputs(value: unknown): { param: string; raw: RawConstraint } {
  if (!isRecord(value)) throw new OpenAIParamError('structured_outputs', `structured_outputs must be an object, got ${show(value)}`);
  const raw: RawConstraint = {};
  for (const [key, v] of Object.entries(value)) {
    const target = STRUCTURED[key];
    if (!target)
      throw new OpenAIParamError(`structured_outputs.${key}`, `structured_outputs.${key} is not supported; the keys are ${Object.keys(STRUCTURED).join(', ')}`);
    if (v !== null && v !== undefined) raw[target] = v;
  }
  return { param: 'structured_outputs', raw };
}

/** The request's constraint, or undefined; a second way of giving one is refused by name. */
export function readOpenAIConstraint(fields: OpenAIFields): { param: string; raw: RawConstraint } | undefined {
  const found: { param: string; raw: RawConstraint }[] = [];
  const format = fields.get('response_format');
  if (format !== undefined) {
    const read = fromResponseFormat(format);
    if (read) found.push(read);
  }
  const structured = fields.get('structured_outputs');
  if (structured !== undefined) found.push(fromStructuredOutputs(structured));
  for (const [name, key] of Object.entries(GUIDED)) {
    const value = fields.get(name);
    if (value !== undefined) found.push({ param: name, raw: { [key]: value } });
  }
  if (found.length > 1) throw new OpenAIParamError(found[1]!.param, `give one constraint: ${found.map((f) => f.param).join(' and ')} were both given`);
  return found[0];
}
