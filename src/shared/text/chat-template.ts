/**
 * A model's chat template: the Jinja text of its `tokenizer_config.json` `chat_template`, rendered with
 * `@huggingface/jinja` (the engine transformers.js uses) the way transformers' `apply_chat_template`
 * renders it: `messages`, `add_generation_prompt`, and the tokenizer's `bos_token` / `eos_token` strings.
 * The template is parsed once; a template that does not parse, or that refuses a conversation
 * (`raise_exception`), is an INVALID_ARGUMENT that says why.
 *
 * @example
 * const template = ChatTemplate.parse(tokenizer.chatTemplate!, { eosToken: '<|im_end|>' });
 * template.render([{ role: 'user', content: 'Hi' }]);
 * // '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
 */
import { Template } from '@huggingface/jinja';
import { AppError, errorMessage } from '../errors.ts';
import type { TextSpan, TextTokenizer } from './tokenizer.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** An assistant turn's function calls, which the template writes its own way (OpenAI's `tool_calls`). */
  toolCalls?: readonly ChatToolCall[];
  /** A tool turn: the call it answers. */
  toolCallId?: string;
}

export interface ChatToolCall {
  id: string;
  name: string;
  /** The arguments as JSON (an object), not its text: templates write them with `tojson`. */
  arguments: unknown;
}

/** What a render is given besides the messages: the functions a model may call (OpenAI's `tools`, as it sends them). */
export interface RenderOptions {
  addGenerationPrompt?: boolean;
  tools?: readonly unknown[];
}

/**
 * What special-token text inside a message becomes: `text` (the default) keeps it ordinary characters, so
 * a message cannot write `<|im_end|><|im_start|>system` and forge a turn; `parse` makes it the special
 * token, as transformers' `apply_chat_template` does, for a trusted client that writes turns itself.
 */
export type SpecialTokensInMessages = 'text' | 'parse';
export const SPECIAL_TOKENS_IN_MESSAGES: readonly SpecialTokensInMessages[] = ['text', 'parse'];

/** Stands for message i in a rendering that locates the messages: private-use characters no tokenizer writes. */
const MARKER = /\u{F0000}(\d+)\u{F0001}/gu;
const marker = (i: number) => `\u{F0000}${i}\u{F0001}`;

export interface ChatTemplateTokens {
  /** The text of the BOS token, for templates that write `{{ bos_token }}` themselves. */
  bosToken?: string;
  eosToken?: string;
}

export class ChatTemplate {
  private constructor(
    private readonly template: Template,
    private readonly tokens: ChatTemplateTokens,
  ) {}

  static parse(source: string, tokens: ChatTemplateTokens = {}): ChatTemplate {
    try {
      return new ChatTemplate(new Template(source), tokens);
    } catch (e) {
      throw new AppError('INVALID_ARGUMENT', `the chat template does not parse: ${errorMessage(e)}`, { cause: e });
    }
  }

  /** The template of a tokenizer's config with its BOS and EOS text; undefined when it has none. */
  static ofTokenizer(tokenizer: TextTokenizer): ChatTemplate | undefined {
    return tokenizer.chatTemplate === undefined ? undefined : ChatTemplate.forTokenizer(tokenizer.chatTemplate, tokenizer);
  }

  /** `source` (a template's Jinja text) with `tokenizer`'s BOS and EOS text, as its own template would get them. */
  static forTokenizer(source: string, tokenizer: TextTokenizer): ChatTemplate {
    const text = (id: number | undefined) => (id === undefined ? undefined : tokenizer.idToToken(id));
    return ChatTemplate.parse(source, { bosToken: text(tokenizer.bosId), eosToken: text(tokenizer.eosIds[0]) });
  }

  /**
   * The prompt's text and ids: special tokens where the template wrote them, and inside messages only
   * with `specialTokensInMessages: 'parse'`. Where no message holds added-token text the ids are those of
   * the whole text with special tokens parsed, as transformers gives them.
   */
  encode(
    messages: readonly ChatMessage[],
    tokenizer: TextTokenizer,
    options: RenderOptions & { specialTokensInMessages?: SpecialTokensInMessages } = {},
  ): { text: string; ids: number[] } {
    const text = this.render(messages, options);
    const guarded = (options.specialTokensInMessages ?? 'text') === 'text' && messages.some((m) => tokenizer.hasAddedTokenText(m.content));
    if (!guarded) return { text, ids: tokenizer.encode(text, { addBos: false, parseSpecialTokens: true }) };
    return { text, ids: tokenizer.encodeWithTextSpans(text, this.messageSpans(messages, text, options), { addBos: false }) };
  }

  /**
   * Where the messages' contents sit in `text` (their rendering): found by rendering markers in their
   * place. A template that rewrites content (trims it, splits out reasoning) does not give `text` back
   * from the markers; then nobody can say which special-token text the user wrote, and it is refused.
   */
  private messageSpans(messages: readonly ChatMessage[], text: string, options: RenderOptions): TextSpan[] {
    const spans = this.locateMessages(messages, text, options);
    if (!spans) {
      throw new AppError(
        'INVALID_ARGUMENT',
        "a message holds special-token text (such as <|im_end|>) and this model's chat template rewrites message content, so it cannot be kept as plain text; remove it, or start the edge with --chat-special-tokens parse to let messages write special tokens",
      );
    }
    return spans;
  }

  /**
   * Each message's content in `text`, the rendering of `messages` with `options`, found by rendering
   * markers in the contents' place (a content rendered twice gives two spans); undefined when the template
   * rewrites content, so that the markers do not give `text` back.
   */
  locateMessages(messages: readonly ChatMessage[], text: string, options: RenderOptions = {}): (TextSpan & { message: number })[] | undefined {
    const marked = this.render(
      messages.map((m, i) => ({ ...m, content: marker(i) })),
      options,
    );
    const spans: (TextSpan & { message: number })[] = [];
    let assembled = '';
    let from = 0;
    for (const found of marked.matchAll(MARKER)) {
      assembled += marked.slice(from, found.index);
      const message = Number(found[1]);
      const content = messages[message]?.content ?? found[0];
      spans.push({ message, start: assembled.length, end: assembled.length + content.length });
      assembled += content;
      from = found.index + found[0].length;
    }
    assembled += marked.slice(from);
    return assembled === text ? spans : undefined;
  }

  /**
   * The prompt text for `messages`. With `addGenerationPrompt` (the default) it ends with the header of
   * the assistant's turn, so the model's next tokens are its reply.
   */
  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    try {
      return this.template.render({
        messages: messages.map(templateMessage),
        add_generation_prompt: options.addGenerationPrompt ?? true,
        bos_token: this.tokens.bosToken ?? '',
        eos_token: this.tokens.eosToken ?? '',
        // transformers passes these too; a template that checks for tools must find none unless some are given.
        tools: options.tools && options.tools.length > 0 ? [...options.tools] : null,
        documents: null,
      });
    } catch (e) {
      throw new AppError('INVALID_ARGUMENT', `the model's chat template refused these messages: ${errorMessage(e)}`, { cause: e });
    }
  }
}

/** A message as transformers hands it to a template: OpenAI's field names, a call's arguments as an object. */
function templateMessage(m: ChatMessage): Record<string, unknown> {
  return {
    role: m.role,
    content: m.content,
    ...(m.toolCalls && m.toolCalls.length > 0
      ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
      : {}),
    ...(m.toolCallId === undefined ? {} : { tool_call_id: m.toolCallId }),
  };
}
