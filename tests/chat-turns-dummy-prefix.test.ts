/**
 * Chat-turn records through a SentencePiece-style tokenizer (issue 57, item 1): llama2.c's tok512, which puts
 * its dummy-prefix space in front of every piece of text after `<s>` or `</s>` and whose decoding drops only
 * the first, so a rendering never comes back whole from its ids. The records must still be exactly the
 * assistant's tokens: checked on the chat pair's own template (text after `<s>` and after `</s>`) and on a
 * Llama-2-style `[INST]` one (`<s>[INST] … [/INST] reply </s>`), on held-back conversations of the chat
 * pair's data and on hand-made ones (a system line, two exchanges, a reply that starts with a space,
 * `</s>` typed as text, characters the tokenizer splits into bytes). The expectations come from the ids
 * alone: the tokens after each turn's header, up to and including `</s>`, decode to the reply.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChatTemplate, type ChatMessage } from '../src/shared/text/chat-template.ts';
import { CHAT_DEMO, DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { assistantPositions } from '../src/tools/lab/chat-turns.ts';
import { parseChatDataset } from '../src/tools/lab/chat-dataset.ts';
import { convertLlama2cTokenizer } from '../src/tools/models/llama2c-tokenizer.ts';

const { tokenizerJson, tokenizerConfig } = convertLlama2cTokenizer(readFileSync(DEMO.tokenizer), 512);
const tokenizer = TextTokenizer.fromJson(tokenizerJson, tokenizerConfig);
const EOS = tokenizer.eosIds[0]!;

/** Meta's Llama 2 chat template (tokenizer_config.json of Llama-2-7b-chat-hf), system turn folded into the first user turn. */
const LLAMA2_TEMPLATE =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}" +
  "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}" +
  "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content + ' ' + eos_token }}{% endif %}{% endfor %}";

const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });
const HAND_MADE: ChatMessage[][] = [
  [
    { role: 'system', content: 'You tell short stories.' },
    user('Tell me a story about a cat.'),
    assistant('Once upon a time, there was a cat named Tom.\nHe was happy.'),
  ],
  [user('Tell me a short story.'), assistant('Lily had a red ball.'), user('Tell me another one.'), assistant('Tim saw a big dog. The end.')],
  [user('Why is </s> here?'), assistant(' It is text you typed: </s> ends nothing.')],
  [user('Say coffee.'), assistant('Un café ☕, s’il vous plaît.')],
];
const heldBack = parseChatDataset(readFileSync(join(CHAT_DEMO.chatDir, 'chats-heldback.jsonl'), 'utf8'), 'chats-heldback.jsonl')!;
/** Single requests and two-exchange ones (the file's last 30). */
const CONVERSATIONS = [...HAND_MADE, ...heldBack.conversations.slice(0, 8).map((c) => c.messages), ...heldBack.conversations.slice(-4).map((c) => c.messages)];

/** The runs of consecutive positions, as [first, last] target indices (position + 1). */
function runs(positions: readonly number[]): [number, number][] {
  const found: [number, number][] = [];
  for (const p of positions) {
    const last = found.at(-1);
    if (last && last[1] === p) last[1] = p + 1;
    else found.push([p + 1, p + 1]);
  }
  return found;
}

/** The text tokens [first, last] add after the tokens before them (a space that starts a word kept). */
function addedText(ids: readonly number[], first: number, last: number): string {
  const stream = tokenizer.createStreamDecoder({ skipSpecialTokens: false, context: ids.slice(0, first) });
  return (
    ids
      .slice(first, last + 1)
      .map((id) => stream.push(id))
      .join('') + stream.flush()
  );
}

/** `headerEnd`: the token that ends each assistant turn's header (`:` of `Assistant:`, `]` of `[/INST]`). */
function checkTemplate(source: string, headerEnd: string, reply: (content: string) => string) {
  const template = ChatTemplate.forTokenizer(source, tokenizer);
  const headerEndId = tokenizer.tokenToId(headerEnd);
  expect(headerEndId).toBeNumber();
  for (const messages of CONVERSATIONS) {
    const { ids, positions } = assistantPositions(template, tokenizer, new Set([EOS]), messages, 'test');
    expect(ids).toEqual(template.encode(messages, tokenizer, { addGenerationPrompt: false }).ids);
    const replies = messages.filter((m) => m.role === 'assistant');
    const found = runs(positions);
    expect(found).toHaveLength(replies.length);
    for (const [n, [first, last]] of found.entries()) {
      // Each run starts after the turn's header (and the template's space where the tokenizer keeps it a
      // token of its own, as before `Un` or a reply that starts with a space), ends at the turn's </s>,
      // and is the reply.
      const header = ids.lastIndexOf(headerEndId!, first - 1);
      expect(first - header).toBeLessThanOrEqual(2);
      expect(addedText(ids, header + 1, first - 1)).toBe(first - header === 2 ? ' ' : '');
      expect(ids[last]).toBe(EOS);
      expect(addedText(ids, header + 1, last)).toBe(reply(replies[n]!.content));
    }
  }
}

describe("chat-turn records through llama2.c's tokenizer (dummy prefix after special tokens)", () => {
  test('the rendering does not come back from its ids: the extra space after <s> and </s>', () => {
    const template = ChatTemplate.forTokenizer(readFileSync(CHAT_DEMO.chatTemplate, 'utf8'), tokenizer);
    const { text, ids } = template.encode(HAND_MADE[1]!, tokenizer, { addGenerationPrompt: false });
    expect(tokenizer.decode(ids, { skipSpecialTokens: false })).toBe(text.replaceAll('<s>', '<s> ').replaceAll('</s>', '</s> '));
  });

  test("the chat pair's template: `Assistant: reply</s>`, text after <s> and after </s>", () => {
    checkTemplate(readFileSync(CHAT_DEMO.chatTemplate, 'utf8'), ':', (content) => ` ${content}</s>`);
  });

  test('a Llama-2-style [INST] template: `<s>[INST] … [/INST] reply </s>`', () => {
    checkTemplate(LLAMA2_TEMPLATE, ']', (content) => ` ${content} </s>`);
  });
});
