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
import { AppError, errorMessage } from './errors.ts';
import type { TextTokenizer } from './tokenizer.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

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
    if (tokenizer.chatTemplate === undefined) return undefined;
    const text = (id: number | undefined) => (id === undefined ? undefined : tokenizer.idToToken(id));
    return ChatTemplate.parse(tokenizer.chatTemplate, { bosToken: text(tokenizer.bosId), eosToken: text(tokenizer.eosIds[0]) });
  }

  /**
   * The prompt text for `messages`. With `addGenerationPrompt` (the default) it ends with the header of
   * the assistant's turn, so the model's next tokens are its reply.
   */
  render(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): string {
    try {
      return this.template.render({
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
        add_generation_prompt: options.addGenerationPrompt ?? true,
        bos_token: this.tokens.bosToken ?? '',
        eos_token: this.tokens.eosToken ?? '',
        // transformers passes these too; a template that checks for tools must find none.
        tools: null,
        documents: null,
      });
    } catch (e) {
      throw new AppError('INVALID_ARGUMENT', `the model's chat template refused these messages: ${errorMessage(e)}`, { cause: e });
    }
  }
}
