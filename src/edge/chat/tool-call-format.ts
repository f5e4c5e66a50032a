/**
 * How a model's chat template writes a function call, read from the template itself: it renders a probe
 * conversation whose assistant turn makes two calls, and finds each call's JSON object (`{"name": ...,
 * "arguments": {...}}`, under whatever keys the template uses) and the tags around it (`<tool_call>\n` and
 * `\n</tool_call>` for Qwen and Hermes-style templates), and what goes between two calls. The model is
 * then held to write calls exactly so (constraint/tool-call-tags.ts, which defines its shape), and the reply is read back the same
 * way (tool-call-reader.ts). A template that ignores `tools`, or writes calls in another form (no tags
 * around the object), has no format: a request with tools gets a 400 saying which.
 *
 * @example
 * const format = toolCallFormat(template);
 * // { begin: '<tool_call>\n', end: '\n</tool_call>', separator: '\n', trigger: '<tool_call>',
 * //   namePrefix: '{"name": "', argumentsPrefix: '", "arguments": ', argumentsSuffix: '}' }
 */
import type { ChatMessage, ChatTemplate } from '../../shared/text/chat-template.ts';
import { AppError } from '../../shared/errors.ts';
import type { ToolCallFormat } from '../constraint/tool-call-tags.ts';

/** Names no request uses (a function name is at most 64 of [A-Za-z0-9_-]), so the probe finds only its own calls. */
const PROBE_NAMES = ['probe_fn_a_b8f1', 'probe_fn_b_b8f1'];
const PROBE_ARGUMENT = 'probe_arg_b8f1';
const PROBE_TOOLS = PROBE_NAMES.map((name) => ({
  type: 'function',
  function: { name, description: 'probe', parameters: { type: 'object', properties: { [PROBE_ARGUMENT]: { type: 'integer' } } } },
}));

export const NO_TOOLS = "this model's chat template does not render tools";

/** The template's call format, or a sentence saying why there is none (for a 400). */
export function toolCallFormat(template: ChatTemplate): ToolCallFormat | string {
  const question: ChatMessage[] = [{ role: 'user', content: 'probe' }];
  let withTools: string;
  let calls: string;
  try {
    if (template.render(question, { tools: PROBE_TOOLS }) === template.render(question)) return NO_TOOLS;
    withTools = template.render(question, { tools: PROBE_TOOLS });
    const toolCalls = PROBE_NAMES.map((name, i) => ({ id: `call_${i}`, name, arguments: { [PROBE_ARGUMENT]: i + 1 } }));
    calls = template.render([...question, { role: 'assistant', content: '', toolCalls }], { tools: PROBE_TOOLS, addGenerationPrompt: false });
  } catch (e) {
    if (e instanceof AppError) return `${NO_TOOLS}: ${e.message}`;
    throw e;
  }
  const unread = `this model's chat template writes tool calls in a form this edge does not read (it reads a JSON object of the name and arguments between tags, as <tool_call>...</tool_call>)`;
  // The calls are written after the probe's prompt: search there, not in the tools' list.
  const from = Math.max(0, commonPrefixLength(withTools, calls));
  const first = callAt(calls, from, PROBE_NAMES[0]!);
  const second = first && callAt(calls, first.end, PROBE_NAMES[1]!);
  if (!first || !second) return unread;
  const begin = /<[^<>\s]+>\s*$/.exec(calls.slice(from, first.start))?.[0];
  const end = /^\s*<\/[^<>\s]+>/.exec(calls.slice(first.end))?.[0];
  if (!begin || !end || !calls.startsWith(begin, second.start - begin.length)) return unread;
  const separator = calls.slice(first.end + end.length, second.start - begin.length);
  if (separator.trim() !== '') return unread;
  return { begin, trigger: begin.trim(), end, separator, ...first.parts };
}

interface FoundCall {
  start: number;
  end: number;
  parts: Pick<ToolCallFormat, 'namePrefix' | 'argumentsPrefix' | 'argumentsSuffix'>;
}

/** The probe call named `name` at or after `from`: its object's place and the text around its name and arguments. */
function callAt(text: string, from: number, name: string): FoundCall | undefined {
  const nameAt = text.indexOf(`"${name}"`, from);
  if (nameAt < 0) return undefined;
  const start = text.lastIndexOf('{', nameAt);
  const end = start < from ? -1 : objectEnd(text, start);
  const argsAt = text.indexOf(`"${PROBE_ARGUMENT}"`, nameAt);
  const argsStart = text.lastIndexOf('{', argsAt);
  const argsEnd = argsAt < 0 ? -1 : objectEnd(text, argsStart);
  if (end < 0 || argsEnd < 0 || argsEnd > end || argsStart < nameAt) return undefined;
  return {
    start,
    end,
    parts: {
      namePrefix: text.slice(start, nameAt + 1),
      argumentsPrefix: text.slice(nameAt + 1 + name.length, argsStart),
      argumentsSuffix: text.slice(argsEnd, end),
    },
  };
}

/** The index just past the JSON object opening at `start` (strings' braces skipped); -1 when it does not close. */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

function commonPrefixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
