/**
 * Function calls as a constraint: xgrammar's structural tag for a request's `tools` and `tool_choice`,
 * written in the form the model's chat template gives calls (chat/tool-call-format.ts reads it). Each
 * function is one tag whose begin is the call's opening up to its arguments (`<tool_call>\n{"name":
 * "get_weather", "arguments": `), whose content is the function's parameter schema, and whose end closes
 * the call (`}\n</tool_call>`). `required` and a named function allow nothing but calls (one, or several
 * with the template's separator between them when parallel calls are allowed and the template writes one); `auto` allows free text,
 * and a call the model opens must be a valid one to its end; `none` holds nothing.
 *
 * @example
 * toolCallTag([{ name: 'get_weather', parameters }], 'required', format, false);
 * // { type: 'structural_tag', format: { type: 'tags_with_separator', tags: [...], separator: '\n', at_least_one: true, stop_after_first: true } }
 */

/** A function the model may call (OpenAI's `tools[i].function`), its parameters checked as a constraint's schema. */
export interface FunctionTool {
  name: string;
  description?: string;
  /** A JSON schema of the arguments' object. */
  parameters: Record<string, unknown>;
}

/** OpenAI's `tool_choice`: a named function is `{ name }`. */
export type ToolChoice = 'none' | 'auto' | 'required' | { name: string };

/** How the model's template writes one call, and two in a row. */
export interface ToolCallFormat {
  /** What opens a call, up to its JSON object (`<tool_call>\n`). */
  begin: string;
  /** The tag alone (`<tool_call>`): what the model writes to start a call. */
  trigger: string;
  /** What closes a call after its object (`\n</tool_call>`). */
  end: string;
  /** What the template writes between two calls of one turn (`\n`). */
  separator: string;
  /** The object's text up to the function's name (`{"name": "`). */
  namePrefix: string;
  /** From the name's end up to the arguments' object (`", "arguments": `). */
  argumentsPrefix: string;
  /** From the arguments' end to the object's end (`}`). */
  argumentsSuffix: string;
}

/** The text of a call to `name` up to its arguments' object. */
export function callOpening(format: ToolCallFormat, name: string): string {
  return format.begin + format.namePrefix + name + format.argumentsPrefix;
}

/** The text of a call after its arguments' object. */
export function callClosing(format: ToolCallFormat): string {
  return format.argumentsSuffix + format.end;
}

/** The structural tag that holds the reply to `choice` among `tools`; undefined for `none` (nothing is held). */
export function toolCallTag(
  tools: readonly FunctionTool[],
  choice: ToolChoice,
  format: ToolCallFormat,
  parallel: boolean,
): Record<string, unknown> | undefined {
  if (choice === 'none') return undefined;
  const callable = typeof choice === 'object' ? tools.filter((t) => t.name === choice.name) : tools;
  const tags = callable.map((tool) => ({
    type: 'tag',
    begin: callOpening(format, tool.name),
    content: { type: 'json_schema', json_schema: tool.parameters },
    end: callClosing(format),
  }));
  const many = { at_least_one: choice !== 'auto', stop_after_first: !parallel };
  if (choice === 'auto') return { type: 'structural_tag', format: { type: 'triggered_tags', triggers: [format.trigger], tags, ...many } };
  // xgrammar needs a separator between tags: a template that writes calls back to back gets one call.
  if (format.separator === '') return { type: 'structural_tag', format: tags.length === 1 ? tags[0] : { type: 'or', elements: tags } };
  return { type: 'structural_tag', format: { type: 'tags_with_separator', tags, separator: format.separator, ...many } };
}
