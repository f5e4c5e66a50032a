/**
 * The JSON schema the constraint bench holds its outputs to: `count` required properties of the kinds a
 * service asks for (strings, integers, numbers, booleans, an enum, a list of strings), no others allowed.
 * `tag` goes into every property's name, so each tag is a schema the box has not compiled yet.
 *
 * @example
 * benchSchema(2, 'a'); // { type: 'object', properties: { a_0: { type: 'string' }, a_1: { type: 'integer' } }, required: ['a_0', 'a_1'], additionalProperties: false }
 */

/** The first-token target is stated for a schema of this many properties. */
export const SCHEMA_PROPERTIES = 20;

const KINDS: readonly Record<string, unknown>[] = [
  { type: 'string' },
  { type: 'integer' },
  { type: 'boolean' },
  { type: 'number' },
  { enum: ['red', 'green', 'blue'] },
  { type: 'array', items: { type: 'string' } },
];

export function benchSchema(count: number, tag: string): Record<string, unknown> {
  const properties = Object.fromEntries(Array.from({ length: count }, (_, i) => [`${tag}_${i}`, KINDS[i % KINDS.length]!]));
  return { type: 'object', properties, required: Object.keys(properties), additionalProperties: false };
}
