/**
 * A JSON schema as the grammar the compiler gets: xgrammar's own conversion (compact, as
 * ConstraintCompiler says), with one rule written in a form that compiles faster. xgrammar writes a JSON
 * string's characters as a right-recursive rule (`sub ::= "\"" | char sub | escape sub`), and its
 * compiler computes the token masks of every position of that rule over the whole vocabulary again at
 * each compile: for the Qwen vocabulary this was most of the compile of any schema with a string in it,
 * however many strings it had. The same language written as a repetition (`(char | escape)* "\""`, the
 * lookahead after it kept) goes through the compiler's path for repeated character classes instead.
 * Only the rule exactly as xgrammar writes it is replaced; a version that writes it otherwise gets its
 * own grammar unchanged.
 *
 * @example
 * const ebnf = await jsonSchemaGrammar(xg, '{"type": "object"}', false);
 * const compiled = await compiler.compileGrammar(ebnf);
 */
import type { XGrammar } from './xgrammar-module.ts';

/** The string rule as `@mlc-ai/web-xgrammar` 0.1.27 prints it, and the same language as a repetition. */
const RECURSIVE_STRING = String.raw`basic_string_sub ::= (("\"") | ([^\0-\x1f\"\\\r\n] basic_string_sub) | ("\\" basic_escape basic_string_sub)) (=([ \n\t]* [,}\]:]))`;
const REPEATED_STRING = String.raw`basic_string_sub ::= (([^\0-\x1f\"\\\r\n] | ("\\" basic_escape))* "\"") (=([ \n\t]* [,}\]:]))`;

/** The rewrite alone, for a grammar text xgrammar printed (tests compare the two languages). */
export function withRepeatedStrings(ebnf: string): string {
  return ebnf
    .split('\n')
    .map((line) => (line === RECURSIVE_STRING ? REPEATED_STRING : line))
    .join('\n');
}

/** The schema's grammar as EBNF text, compact JSON; `strict`: no properties the schema does not name. */
export async function jsonSchemaGrammar(xg: XGrammar, schema: string, strict: boolean): Promise<string> {
  const grammar = await xg.Grammar.fromJSONSchema(schema, false, -1, undefined, strict);
  try {
    return withRepeatedStrings(grammar.toString());
  } finally {
    grammar.dispose();
  }
}
