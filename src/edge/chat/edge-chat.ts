/**
 * The edge's chat: the edge pack's template as exports ship it (`chat_template.jinja`, or the
 * tokenizer config's `chat_template`), or the one `--chat-template` names (a file, or `chatml`), turning a
 * conversation into the prompt's text and ids for every entry point (the page, the JSON API, gRPC, the
 * OpenAI API). A pack without a template still serves completions; a chat then gets a 400 that says why.
 *
 * @example
 * const chat = EdgeChat.load(tokenizer, { modelName: 'qwen-0.5b' });
 * const run = chat.start(runtime, [{ role: 'user', content: 'Hi' }], raw); // from chat.prompt(messages)'s ids
 */
import { existsSync, readFileSync } from 'node:fs';
import { ChatTemplate, type ChatMessage, type SpecialTokensInMessages } from '../../shared/text/chat-template.ts';
import { AppError, errorMessage } from '../../shared/errors.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import type { RawGenerationRequest } from '../request/generation-request.ts';
import type { EdgeChatMessage } from './chat-messages.ts';
import { toolCallTag, type FunctionTool, type ToolCallFormat, type ToolChoice } from '../constraint/tool-call-tags.ts';
import { toolCallFormat } from './tool-call-format.ts';

/** A chat request's functions (OpenAI's `tools`, `tool_choice`, `parallel_tool_calls`). */
export interface ChatTools {
  tools: FunctionTool[];
  choice: ToolChoice;
  parallel: boolean;
}

/**
 * ChatML as Qwen2.5-Instruct writes it, without its default system prompt: for `--chat-template chatml`,
 * an instruct export that ships no template.
 */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface EdgeChatOptions {
  /** `--chat-template`: a Jinja file, or `chatml`; the pack's own template when absent. */
  template?: string;
  specialTokens?: SpecialTokensInMessages;
  /** How errors name the model (the served name). */
  modelName: string;
}

export class EdgeChat {
  /** The template's call format, read once at the first chat that needs it (or why it has none). */
  private callFormat: ToolCallFormat | string | undefined;

  private constructor(
    readonly template: ChatTemplate | undefined,
    private readonly tokenizer: TextTokenizer,
    private readonly specialTokens: SpecialTokensInMessages,
    /** Why there is no chat, in words for a 400; '' when there is one. */
    readonly problem: string,
  ) {}

  /** A `--chat-template` that cannot be read or parsed stops the start (the operator asked for it); the pack's own costs only the chat. */
  static load(tokenizer: TextTokenizer, options: EdgeChatOptions): EdgeChat {
    const special = options.specialTokens ?? 'text';
    if (options.template !== undefined) return new EdgeChat(chatTemplateOption(tokenizer, options.template), tokenizer, special, '');
    try {
      const own = ChatTemplate.ofTokenizer(tokenizer);
      if (own) return new EdgeChat(own, tokenizer, special, '');
      return new EdgeChat(
        undefined,
        tokenizer,
        special,
        `model ${options.modelName} has no chat template (no chat_template.jinja, no chat_template in its tokenizer_config.json; the edge's --chat-template can name one); send a prompt instead`,
      );
    } catch (e) {
      return new EdgeChat(undefined, tokenizer, special, `model ${options.modelName} has a chat template this edge cannot use: ${errorMessage(e)}`);
    }
  }

  get available(): boolean {
    return this.template !== undefined;
  }

  /** The prompt for `messages` (and the functions the model may call), ending with the assistant's turn: INVALID_ARGUMENT naming the problem otherwise. */
  prompt(messages: readonly ChatMessage[], tools?: readonly FunctionTool[]): { text: string; ids: number[] } {
    if (!this.template) throw new AppError('INVALID_ARGUMENT', this.problem);
    if (messages.length === 0) throw new AppError('INVALID_ARGUMENT', 'messages must hold at least one message');
    const rendered = tools?.map((t) => ({ type: 'function', function: t }));
    return this.template.encode(messages, this.tokenizer, { specialTokensInMessages: this.specialTokens, ...(rendered ? { tools: rendered } : {}) });
  }

  /** How the template writes a function call (tool-call-format.ts); INVALID_ARGUMENT saying why when it has no way. */
  toolCallFormat(): ToolCallFormat {
    if (!this.template) throw new AppError('INVALID_ARGUMENT', this.problem);
    this.callFormat ??= toolCallFormat(this.template);
    if (typeof this.callFormat === 'string') throw new AppError('INVALID_ARGUMENT', this.callFormat);
    return this.callFormat;
  }

  /**
   * A generation of the conversation's next assistant turn: from the template's ids, its text as the prompt.
   * The messages' private texts are the generation's; `private_spans` of the whole request would point into
   * a prompt the caller never saw, so they are refused. With tools (and a choice other than `none`, which
   * renders none), the template renders them and the reply is held to calls of them as the choice says
   * (constraint/tool-call-tags.ts); a conversation with earlier calls needs a template that writes them.
   */
  start(
    runtime: Pick<EdgeRuntime, 'begin'>,
    messages: readonly EdgeChatMessage[],
    raw: RawGenerationRequest,
    id?: string,
    tools?: ChatTools,
  ): ReturnType<EdgeRuntime['begin']> {
    if (raw.privateSpans != null)
      throw new AppError('INVALID_ARGUMENT', 'with messages, mark private spans in each message (messages[i].private_spans), not in the request');
    const calling = tools !== undefined && tools.choice !== 'none';
    const format = calling || messages.some((m) => m.role === 'tool' || m.toolCalls) ? this.toolCallFormat() : undefined;
    if (calling && raw.constraint !== undefined) {
      throw new AppError('INVALID_ARGUMENT', 'tools hold the reply to function calls; give a response_format or other constraint only with tool_choice none');
    }
    const { text, ids } = this.prompt(
      messages.map(({ privateTexts: _, ...message }) => message),
      calling ? tools.tools : undefined,
    );
    const privateTexts = messages.flatMap((m) => m.privateTexts ?? []);
    const tag = calling && format ? toolCallTag(tools.tools, tools.choice, format, tools.parallel) : undefined;
    return runtime.begin(
      { ...raw, prompt: text, ...(privateTexts.length > 0 ? { privateTexts } : {}), ...(tag ? { constraint: { toolCalls: tag } } : {}) },
      id,
      ids,
    );
  }
}

/**
 * The template `--chat-template` names (a Jinja file, or `chatml`), with the tokenizer's BOS and EOS text: the
 * edge's, and the tools' where they render a conversation as the deployed edge does.
 */
export function chatTemplateOption(tokenizer: TextTokenizer, option: string): ChatTemplate {
  return ChatTemplate.forTokenizer(templateSource(option), tokenizer);
}

function templateSource(option: string): string {
  if (option === 'chatml') return CHATML_TEMPLATE;
  if (!existsSync(option)) throw new AppError('INVALID_ARGUMENT', `--chat-template ${option}: no such file (give a Jinja file, or chatml)`);
  return readFileSync(option, 'utf8');
}
