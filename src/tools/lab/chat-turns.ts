/**
 * A conversation as the router is trained on it: rendered whole through the pack's chat template (no
 * generation prompt) and encoded as the edge encodes a chat (`ChatTemplate.encode`: special tokens where the
 * template wrote them); the positions to learn from are those whose next token belongs to an assistant
 * message's content or ends its turn (the template's text after the content up to and including the first
 * stop id: `<|im_end|>` for Qwen). Template text before the content (the turn's header, Qwen3's empty
 * `<think>` block) is not the assistant's: in deployment the generation prompt or the template writes it.
 *
 * The contents are found in the rendering the way chat-template.ts finds them, by rendering markers in
 * their place; each token's place in the text comes from decoding the ids one by one, under the
 * tokenizer's own decoding rules: a SentencePiece-style tokenizer (llama2.c's, Llama 2's) gives text after
 * `<s>` or `</s>` back with its dummy-prefix space, which the rendering does not hold. A template that
 * rewrites content (strips it, splits out reasoning) leaves nothing to locate and is refused.
 *
 * The on-policy rollouts start where an assistant answers: the turns up to each user message that an
 * assistant message follows, rendered with the generation prompt.
 *
 * @example
 * const { ids, positions } = assistantPositions(template, tokenizer, stopIds, messages);
 * // ids[p + 1] is an assistant token for every p in positions
 */
import { AppError } from '../../shared/errors.ts';
import type { ChatMessage, ChatTemplate } from '../../shared/text/chat-template.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

interface Span {
  message: number;
  start: number;
  end: number;
}

export interface ChatSequence {
  text: string;
  ids: number[];
  /** Positions p (ascending) whose next token ids[p + 1] is the assistant's. */
  positions: number[];
}

/** Where each message's content sits in `text`, its rendering; undefined when the template rewrote content. */
function contentSpans(template: ChatTemplate, messages: readonly ChatMessage[], text: string): Span[] | undefined {
  return template.locateMessages(messages, text, { addGenerationPrompt: false });
}

/** prefixAfterSpecial's answer per tokenizer: measured once, not once per conversation. */
const prefixes = new WeakMap<TextTokenizer, string>();

/**
 * What the tokenizer gives back in front of text that follows a special token: nothing for byte-level
 * BPE (Qwen), the dummy-prefix space for SentencePiece-style tokenizers (llama2.c's, Llama 2's), which
 * prefix every piece of text between special tokens and whose decoding drops only the text's first.
 * Measured on the tokenizer itself: a special token, then a letter.
 */
function prefixAfterSpecial(tokenizer: TextTokenizer): string {
  const known = prefixes.get(tokenizer);
  if (known !== undefined) return known;
  const [content] = tokenizer.specialTokens.keys();
  let prefix = '';
  if (content !== undefined) {
    const [special, ...rest] = tokenizer.encode(`${content}a`, { addBos: false, parseSpecialTokens: true });
    const stream = tokenizer.createStreamDecoder({ skipSpecialTokens: false, context: [special!] });
    const piece = rest.map((id) => stream.push(id)).join('') + stream.flush();
    if (special === tokenizer.specialTokenId(content) && piece.endsWith('a')) prefix = piece.slice(0, -1);
  }
  prefixes.set(tokenizer, prefix);
  return prefix;
}

/**
 * Each token's [start, end) in `text`, the rendering its ids encode (a token that only begins a character
 * ends where it starts), or undefined when the ids do not decode to it. Decoding is the tokenizer's own,
 * one token at a time, with its one rule that the text does not show: text after a special token comes
 * back with `prefix` in front (prefixAfterSpecial), which belongs to no character of the rendering.
 */
function tokenOffsets(tokenizer: TextTokenizer, ids: readonly number[], text: string): { starts: number[]; ends: number[] } | undefined {
  const prefix = prefixAfterSpecial(tokenizer);
  const stream = tokenizer.createStreamDecoder({ skipSpecialTokens: false });
  const starts: number[] = [];
  const ends: number[] = [];
  let at = 0;
  let pending = '';
  const take = (piece: string): boolean => {
    // The prefix may come with a later piece than the section's first token (one that only begins a character).
    if (pending && piece) {
      if (piece.startsWith(pending)) piece = piece.slice(pending.length);
      pending = '';
    }
    if (!text.startsWith(piece, at)) return false;
    at += piece.length;
    return true;
  };
  for (const id of ids) {
    starts.push(at);
    if (!take(stream.push(id))) return undefined;
    ends.push(at);
    if (tokenizer.isSpecialId(id)) pending = prefix;
  }
  return take(stream.flush()) && at === text.length ? { starts, ends } : undefined;
}

function locate(template: ChatTemplate, tokenizer: TextTokenizer, messages: readonly ChatMessage[]) {
  const { text, ids } = template.encode(messages, tokenizer, { addGenerationPrompt: false });
  const spans = contentSpans(template, messages, text);
  if (!spans)
    return {
      problem: "the chat template rewrites message content (it trims it or splits out reasoning), so the assistant's tokens cannot be located",
    } as const;
  const offsets = tokenOffsets(tokenizer, ids, text);
  if (!offsets)
    return {
      problem: 'the tokenizer does not give the rendered conversation back from its ids (decoded one by one, allowing its prefix after special tokens)',
    } as const;
  return { text, ids, spans, ...offsets } as const;
}

/**
 * The conversation's ids and the positions to learn from (see the module comment). `stopIds` are the ids
 * generation stops at (the pack's generation_config.json `eos_token_id` and the tokenizer's EOS). `where`
 * names the conversation in errors.
 */
export function assistantPositions(
  template: ChatTemplate,
  tokenizer: TextTokenizer,
  stopIds: ReadonlySet<number>,
  messages: readonly ChatMessage[],
  where: string,
): ChatSequence {
  let found = locate(template, tokenizer, messages);
  // A tokenizer that normalizes (Qwen's NFC) gives back the normalized text; the same ids come from normalized content.
  if ('problem' in found)
    found = locate(
      template,
      tokenizer,
      messages.map((m) => ({ role: m.role, content: m.content.normalize('NFC') })),
    );
  if ('problem' in found) throw new AppError('INVALID_ARGUMENT', `${where}: ${found.problem}`);
  const { text, ids, spans, starts, ends } = found;
  const target = new Uint8Array(ids.length);
  for (const [n, span] of spans.entries()) {
    if (messages[span.message]!.role !== 'assistant') continue;
    let k = 0;
    for (; k < ids.length && starts[k]! < span.end; k++) {
      // A token overlapping the content is the assistant's (one that only begins a character counts where it starts).
      if (Math.max(ends[k]!, starts[k]! + 1) > span.start) target[k] = 1;
    }
    // Then the template's text up to and including the first stop id, before the next message begins.
    const next = spans[n + 1]?.start ?? text.length + 1;
    for (let j = k; j < ids.length && starts[j]! < next; j++) {
      if (!stopIds.has(ids[j]!)) continue;
      for (let t = k; t <= j; t++) target[t] = 1;
      break;
    }
  }
  const positions: number[] = [];
  for (let k = 1; k < ids.length; k++) if (target[k]) positions.push(k - 1);
  return { text, ids, positions };
}

/** The prompts a conversation's rollouts start from: its turns up to each user message an assistant answers. */
export function userTurnPrompts(template: ChatTemplate, tokenizer: TextTokenizer, messages: readonly ChatMessage[]): { text: string; ids: number[] }[] {
  const prompts: { text: string; ids: number[] }[] = [];
  for (const [i, m] of messages.entries()) {
    if (m.role !== 'user' || messages[i + 1]?.role !== 'assistant') continue;
    prompts.push(template.encode(messages.slice(0, i + 1), tokenizer, { addGenerationPrompt: true }));
  }
  return prompts;
}
