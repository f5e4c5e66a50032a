/**
 * A small JSON schema checker for the keywords the constrained-decoding tests use (type, properties,
 * required, additionalProperties false, enum, minLength/maxLength, minimum/maximum, items, minItems/maxItems):
 * written here, independent of xgrammar, so the tests check its outputs against the schema itself.
 *
 * @example
 * schemaProblems({ type: 'integer', maximum: 9 }, 12); // ['$: 12 > maximum 9']
 */
type Schema = Record<string, unknown>;

export function schemaProblems(schema: Schema, value: unknown, at = '$'): string[] {
  const problems: string[] = [];
  const fail = (what: string) => problems.push(`${at}: ${what}`);
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) fail(`${JSON.stringify(value)} not in enum`);
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return [...problems, `${at}: not an object`];
      const record = value as Record<string, unknown>;
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      for (const name of (schema.required ?? []) as string[]) if (!(name in record)) fail(`missing ${name}`);
      for (const [name, v] of Object.entries(record)) {
        if (properties[name]) problems.push(...schemaProblems(properties[name], v, `${at}.${name}`));
        else if (schema.additionalProperties === false) fail(`unexpected property ${name}`);
      }
      break;
    }
    case 'array':
      if (!Array.isArray(value)) return [...problems, `${at}: not an array`];
      if (typeof schema.minItems === 'number' && value.length < schema.minItems) fail(`fewer than ${schema.minItems} items`);
      if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) fail(`more than ${schema.maxItems} items`);
      value.forEach((v, i) => schema.items && problems.push(...schemaProblems(schema.items as Schema, v, `${at}[${i}]`)));
      break;
    case 'string':
      if (typeof value !== 'string') return [...problems, `${at}: not a string`];
      if (typeof schema.maxLength === 'number' && [...value].length > schema.maxLength) fail(`longer than ${schema.maxLength}`);
      if (typeof schema.minLength === 'number' && [...value].length < schema.minLength) fail(`shorter than ${schema.minLength}`);
      break;
    case 'integer':
    case 'number':
      if (typeof value !== 'number' || (schema.type === 'integer' && !Number.isInteger(value))) return [...problems, `${at}: not an ${schema.type}`];
      if (typeof schema.minimum === 'number' && value < schema.minimum) fail(`${value} < minimum ${schema.minimum}`);
      if (typeof schema.maximum === 'number' && value > schema.maximum) fail(`${value} > maximum ${schema.maximum}`);
      break;
    case 'boolean':
      if (typeof value !== 'boolean') fail('not a boolean');
      break;
  }
  return problems;
}
