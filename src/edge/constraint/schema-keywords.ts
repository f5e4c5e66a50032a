/**
 * The JSON schema keywords a constrained generation may use: those xgrammar's compiler turns into grammar
 * (and so holds on every token), and annotations that constrain nothing. Any other keyword is refused by
 * name: xgrammar would compile a schema with `uniqueItems` or `not` and simply not enforce it, and an
 * output the caller was promised would validate then might not.
 *
 * @example
 * unsupportedKeyword({ type: 'array', uniqueItems: true }); // { keyword: 'uniqueItems', at: '$' }
 */
import { isRecord } from '../../shared/is-record.ts';

const ENFORCED = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'unevaluatedProperties',
  'patternProperties',
  'propertyNames',
  'minProperties',
  'maxProperties',
  'items',
  'prefixItems',
  'unevaluatedItems',
  'minItems',
  'maxItems',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  'allOf',
  '$ref',
  '$defs',
  'definitions',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
]);
const ANNOTATIONS = new Set([
  'title',
  'description',
  'default',
  'examples',
  '$schema',
  '$id',
  '$comment',
  'deprecated',
  'readOnly',
  'writeOnly',
  'strict',
  'name',
]);
/** Keywords whose value maps names to schemas, holds one schema, or lists schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions']);
const ONE_SCHEMA = new Set(['additionalProperties', 'unevaluatedProperties', 'propertyNames', 'items', 'unevaluatedItems']);
const SCHEMA_LISTS = new Set(['prefixItems', 'anyOf', 'oneOf', 'allOf']);

/** The first keyword of `schema` (or a schema inside it) that no output is held to, with where it is. */
export function unsupportedKeyword(schema: unknown, at = '$'): { keyword: string; at: string } | undefined {
  if (!isRecord(schema)) return undefined;
  for (const [keyword, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(keyword)) continue;
    if (!ENFORCED.has(keyword)) return { keyword, at };
    const inner: [unknown, string][] =
      SCHEMA_MAPS.has(keyword) && isRecord(value)
        ? Object.entries(value).map(([name, s]) => [s, `${at}.${keyword}.${name}`])
        : ONE_SCHEMA.has(keyword)
          ? [[value, `${at}.${keyword}`]]
          : SCHEMA_LISTS.has(keyword) && Array.isArray(value)
            ? value.map((s, i) => [s, `${at}.${keyword}[${i}]`])
            : [];
    for (const [s, where] of inner) {
      const found = unsupportedKeyword(s, where);
      if (found) return found;
    }
  }
  return undefined;
}
