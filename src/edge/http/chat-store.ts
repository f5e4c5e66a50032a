/**
 * The page's chats, kept on the box: each chat's finished turns (user and assistant messages) under a
 * random id the page holds, and the turn being answered.
 *
 * Why on the box and not in the browser (sessionStorage sent with each turn): the box must hold the whole
 * conversation anyway while it renders the template and generates, and keeping it here means each turn
 * sends one message, not the whole conversation, so the body limit (--max-body-bytes) stays about one
 * message; the assistant's message is the run's own generated text (the done event's), never text read
 * back from the page; and the page stays plain htmx with no state kept by script. What it costs: a chat
 * lives in memory, so a reload of the page or a restart of the edge starts a new one (the prompt cache the
 * turns reuse lives in memory too). Memory is bounded: at most MAX_CHATS chats, the least recently used
 * dropped first, and each within the context window (a turn that would pass it is refused before it is
 * kept). The id is a random UUID behind the access token; New chat forgets the chat at once.
 *
 * Each user message keeps the texts its sender marked private (the page's Mark private): every later turn
 * sends the whole conversation through the cloud, so those texts stay private in every turn after the one
 * that marked them. Assistant messages carry none of their own: a private value is private wherever it
 * occurs, replies included.
 *
 * @example
 * const chat = store.create();
 * store.begin(chat, run.id, 'Hi, I am Ann', [{ text: 'Ann', kind: 'name' }]); // when the turn's run is accepted
 * store.commit(chat.id, run.id, ' Hello!'); // at its done event: both messages join the conversation
 * store.settle(chat.id, run.id);            // when its run is over: a turn with no done event is dropped
 */
import type { EdgeChatMessage } from '../chat/chat-messages.ts';
import type { PrivateText } from '../privacy/private-values.ts';

const MAX_CHATS = 64;

export interface PageChat {
  readonly id: string;
  /** The finished turns, user and assistant in turn; a user message with the texts it marked private. */
  readonly messages: EdgeChatMessage[];
  /** The turn being answered: its run and the user's message, kept once the run's done event comes. */
  turn?: { runId: string; user: string; privateTexts: readonly PrivateText[] };
}

export class ChatStore {
  /** Least recently used first: a Map keeps insertion order, and a use re-inserts. */
  private readonly chats = new Map<string, PageChat>();

  constructor(private readonly maxChats = MAX_CHATS) {}

  get size(): number {
    return this.chats.size;
  }

  /** A new, empty chat; the least recently used one goes when the store is full. */
  create(id: string = crypto.randomUUID()): PageChat {
    if (this.chats.size >= this.maxChats) this.chats.delete(this.chats.keys().next().value!);
    const chat: PageChat = { id, messages: [] };
    this.chats.set(chat.id, chat);
    return chat;
  }

  /** The chat, marked as just used; undefined when it was never made, was forgotten or was dropped. */
  get(id: string): PageChat | undefined {
    const chat = this.chats.get(id);
    if (chat) {
      this.chats.delete(id);
      this.chats.set(id, chat);
    }
    return chat;
  }

  begin(chat: PageChat, runId: string, user: string, privateTexts: readonly PrivateText[] = []): void {
    chat.turn = { runId, user, privateTexts };
  }

  /** Every text the chat's finished messages marked private, in the order they were marked (which keeps each one's placeholder from turn to turn). */
  privateTexts(chat: PageChat): PrivateText[] {
    return chat.messages.flatMap((m) => m.privateTexts ?? []);
  }

  /**
   * The turn's reply came: the user's message and the reply join the conversation. The reply is trimmed:
   * the template writes its own separator between the assistant's header and the content, so a reply's
   * leading space would be doubled and the next prompt would stop matching the cached tokens there.
   */
  commit(chatId: string, runId: string, reply: string): void {
    const chat = this.chats.get(chatId);
    if (chat?.turn?.runId !== runId) return;
    const { user, privateTexts } = chat.turn;
    chat.messages.push(
      { role: 'user', content: user, ...(privateTexts.length > 0 ? { privateTexts: [...privateTexts] } : {}) },
      { role: 'assistant', content: reply.trim() },
    );
    chat.turn = undefined;
  }

  /** The turn's run is over: a turn still waiting for its reply (failed, dropped, stopped before it began) is not kept. */
  settle(chatId: string, runId: string): void {
    const chat = this.chats.get(chatId);
    if (chat?.turn?.runId === runId) chat.turn = undefined;
  }

  /** Forgets a chat (New chat); returns the run of the turn it was answering, for the caller to stop. */
  forget(id: string): string | undefined {
    const runId = this.chats.get(id)?.turn?.runId;
    this.chats.delete(id);
    return runId;
  }
}
