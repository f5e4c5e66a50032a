/**
 * OpenAI's function calling fields of a chat request: `tools` (function tools, each a name, a
 * description and a JSON schema of its arguments' object), `tool_choice` (`none`, `auto`, `required`, or
 * `{type: "function", function: {name}}`) and `parallel_tool_calls`. Each is checked here with the field
 * at fault named; whether the model's template renders tools, and the constraint the choice makes, are the
 * chat's (chat/edge-chat.ts). Without `tools`, `tool_choice` is refused, as OpenAI refuses it.
 *
 * @example
 * readOpenAITools(fields); // { tools: [{ name: 'get_weather', parameters: {...} }], choice: 'auto', parallel: true }
 */
import { isRecord } from '../../../shared/is-record.ts';
import type { ChatTools } from '../../chat/edge-chat.ts';
import { unsupportedKeyword } from '../../constraint/schema-keywords.ts';
import type { FunctionTool, ToolChoice } from '../../constraint/tool-call-tags.ts';
import { OpenAIParamError } from './openai-errors.ts';
import { show, type OpenAIFields } from './openai-fields.ts';

export const TOOL_FIELDS = ['tools', 'tool_choice', 'parallel_tool_calls'];

/** OpenAI's limits: at most 128 functions, names of 1 to 64 letters, digits, underscores and dashes. */
const MAX_TOOLS = 128;
const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const FUNCTION_KEYS = ['name', 'description', 'parameters', 'strict'];

export function readOpenAITools(fields: OpenAIFields): ChatTools | undefined {
  const value = fields.get('tools');
  const parallel = fields.boolean('parallel_tool_calls') ?? true;
  if (value === undefined) {
    if (fields.get('tool_choice') !== undefined) throw new OpenAIParamError('tool_choice', 'tool_choice is only allowed when tools are given');
    return undefined;
  }
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_TOOLS) {
    throw new OpenAIParamError('tools', `tools must be a list of 1 to ${MAX_TOOLS} function tools, got ${show(value).slice(0, 80)}`);
  }
  const tools = value.map((tool: unknown, i) => readTool(tool, `tools[${i}]`));
  const seen = new Set<string>();
  tools.forEach((t, i) => {
    if (seen.has(t.name)) throw new OpenAIParamError(`tools[${i}].function.name`, `tools[${i}].function.name: a second function named ${show(t.name)}`);
    seen.add(t.name);
  });
  return { tools, choice: readChoice(fields.get('tool_choice'), tools), parallel };
}

function readTool(tool: unknown, at: string): FunctionTool {
  if (!isRecord(tool) || tool.type !== 'function' || !isRecord(tool.function)) {
    throw new OpenAIParamError(at, `${at} must be {type: "function", function: {name, description, parameters}}, got ${show(tool).slice(0, 80)}`);
  }
  const fn = tool.function;
  const extra = Object.keys(fn).find((k) => !FUNCTION_KEYS.includes(k));
  if (extra !== undefined) throw new OpenAIParamError(`${at}.function.${extra}`, `unsupported parameter: ${at}.function.${extra}`);
  if (typeof fn.name !== 'string' || !FUNCTION_NAME.test(fn.name)) {
    throw new OpenAIParamError(`${at}.function.name`, `${at}.function.name must be 1 to 64 letters, digits, underscores or dashes, got ${show(fn.name)}`);
  }
  if (fn.description !== undefined && fn.description !== null && typeof fn.description !== 'string') {
    throw new OpenAIParamError(`${at}.function.description`, `${at}.function.description must be a string`);
  }
  if (fn.strict !== undefined && fn.strict !== null && typeof fn.strict !== 'boolean') {
    throw new OpenAIParamError(`${at}.function.strict`, `${at}.function.strict must be a boolean`);
  }
  return {
    name: fn.name,
    ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
    parameters: readParameters(fn.parameters, `${at}.function.parameters`),
  };
}

/** The arguments' schema: an object's (none given is a function without arguments). The calls are held to it, so it must be one xgrammar enforces. */
function readParameters(value: unknown, at: string): Record<string, unknown> {
  if (value === undefined || value === null) return { type: 'object', properties: {} };
  if (!isRecord(value)) throw new OpenAIParamError(at, `${at} must be a JSON schema object, got ${show(value).slice(0, 80)}`);
  if (value.type !== undefined && value.type !== 'object')
    throw new OpenAIParamError(at, `${at} must describe an object (type "object"), got type ${show(value.type)}`);
  const unsupported = unsupportedKeyword(value);
  if (unsupported) {
    throw new OpenAIParamError(at, `${at} uses "${unsupported.keyword}" (at ${unsupported.at}), which constrained decoding does not enforce; remove it`);
  }
  return { type: 'object', ...value };
}

function readChoice(value: unknown, tools: readonly FunctionTool[]): ToolChoice {
  if (value === undefined) return 'auto';
  if (value === 'none' || value === 'auto' || value === 'required') return value;
  if (!isRecord(value) || value.type !== 'function' || !isRecord(value.function) || typeof value.function.name !== 'string') {
    throw new OpenAIParamError(
      'tool_choice',
      `tool_choice must be none, auto, required or {type: "function", function: {name}}, got ${show(value).slice(0, 80)}`,
    );
  }
  const { name } = value.function;
  if (!tools.some((t) => t.name === name)) {
    throw new OpenAIParamError(
      'tool_choice.function.name',
      `tool_choice names the function ${show(name)}, which is not among tools (${tools.map((t) => t.name).join(', ')})`,
    );
  }
  return { name };
}
