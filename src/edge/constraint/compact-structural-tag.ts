/**
 * A structural tag's JSON compiled compact, as every JSON schema here is (constraint-compiler.ts): xgrammar
 * compiles a tag's `json_schema` content allowing any whitespace, so a model could spend its whole token
 * budget inside a call's arguments writing spaces. Each `json_schema` format becomes the `grammar` format of
 * the same schema's compact JSON (`{"a": 1, "b": [2]}`, the separators chat templates write arguments with).
 * Text that is not JSON is given back as it is, for the compiler to refuse.
 *
 * @example
 * await compactStructuralTag('{"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": {...}}, "end": "</a>"}');
 * // the same tag, its content { type: 'grammar', grammar: 'root ::= ...' }
 */
import { isRecord } from '../../shared/is-record.ts';
import { loadXGrammar } from './xgrammar-module.ts';

export async function compactStructuralTag(text: string): Promise<string> {
  let tag: unknown;
  try {
    tag = JSON.parse(text);
  } catch {
    return text;
  }
  const xg = await loadXGrammar();
  const compact = async (node: unknown): Promise<unknown> => {
    if (Array.isArray(node)) return Promise.all(node.map(compact));
    if (!isRecord(node)) return node;
    if (node.type === 'json_schema' && node.json_schema !== undefined) {
      const grammar = await xg.Grammar.fromJSONSchema(JSON.stringify(node.json_schema), false, -1);
      try {
        return { type: 'grammar', grammar: grammar.toString() };
      } finally {
        grammar.dispose();
      }
    }
    const entries: [string, unknown][] = [];
    for (const [key, value] of Object.entries(node)) entries.push([key, await compact(value)]);
    return Object.fromEntries(entries);
  };
  return JSON.stringify(await compact(tag));
}
