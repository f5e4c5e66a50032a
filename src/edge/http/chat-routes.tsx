/** @jsxImportSource hono/jsx */
/**
 * The page's chat (views/chat-page.tsx), for an edge whose pack has a chat template. A message posted to
 * /chat/turns joins its chat's conversation (chat-store.ts), goes through the edge's chat template, and
 * starts as a page run from the template's ids: the reply streams through /runs/:id/events like any run,
 * and its text becomes the assistant's message of the next turn's prompt, which the prompt cache then
 * mostly restores. A message the edge refuses (no template, a role the template refuses, an empty
 * message, a conversation past the context window, a full edge) is answered with the reason in its
 * place, and the conversation is unchanged. /chat/reset forgets a chat (New chat).
 *
 * A message's `private_spans` (the page's Mark private: the JSON of code-point ranges of the message as
 * typed) become texts the chat keeps with the message; each turn's run holds those of every message so far,
 * so a name marked in the first turn never reaches the cloud in any later one either.
 *
 * @example
 * app.route('/', chatRoutes({ runtime, chat, pending, defaults }));
 * // POST /chat/turns  chat=&message=Hi&mode=joint&threshold=0.6  → the user's turn and the assistant's, streaming
 */
import { Hono } from 'hono';
import type { ChatMessage } from '../../shared/text/chat-template.ts';
import { AppError, isAppError } from '../../shared/errors.ts';
import { AssistantTurn, ChatIdInput, EmptyChat, RefusedTurn, SendButton, UserTurn } from '../../../views/chat-fragments.tsx';
import { ChatPage, ChatUnavailablePage } from '../../../views/chat-page.tsx';
import type { FormDefaults } from '../../../views/generate-page.tsx';
import type { EdgeChat } from '../chat/edge-chat.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import { readPrivateSpans } from '../privacy/private-spans.ts';
import type { PrivateText } from '../privacy/private-values.ts';
import { formSpans, readGenerationRequest } from '../request/generation-request-fields.ts';
import { ChatStore } from './chat-store.ts';
import { httpStatus } from './http-errors.ts';
import type { PageRun, PendingRuns } from './pending-runs.ts';
import { readForm } from './request-body.ts';

export interface ChatRouteDeps {
  runtime: EdgeRuntime;
  chat: EdgeChat;
  pending: PendingRuns;
  defaults: FormDefaults;
}

/**
 * The chat form's own fields; the rest are the generation request's (mode, threshold, max_new_tokens, ...).
 * `private_spans` is the message's here, not the prompt's (the template's rendering, which the page never sees).
 */
const CHAT_FIELDS = new Set(['chat', 'message', 'system', 'private_spans']);

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

/** A form field sent once, as text; '' when absent. */
function formText(form: Record<string, string | string[]>, name: string): string {
  const value = form[name] ?? '';
  if (Array.isArray(value)) invalid(`${name} was sent ${value.length} times; send it once`);
  return value;
}

/** The texts under the message's `private_spans` (blank: none), ranges of `typed`, the message as the page sent it. */
function messagePrivateTexts(form: Record<string, string | string[]>, typed: string): PrivateText[] {
  return readPrivateSpans(formSpans('private_spans', formText(form, 'private_spans'), ' of the message'), typed, 'private_spans');
}

export function chatRoutes(deps: ChatRouteDeps): Hono {
  const { runtime, chat, pending } = deps;
  const routes = new Hono();
  const chats = new ChatStore();

  routes.get('/chat', (c) => (chat.available ? c.html(<ChatPage defaults={deps.defaults} />) : c.html(<ChatUnavailablePage problem={chat.problem} />, 404)));

  routes.post('/chat/turns', async (c) => {
    const form = await readForm(c);
    let message = '';
    try {
      const typed = formText(form, 'message');
      message = typed.trim();
      const chatId = formText(form, 'chat');
      const system = formText(form, 'system').trim();
      const known = chatId === '' ? undefined : chats.get(chatId);
      if (chatId !== '' && !known) {
        throw new AppError('NOT_FOUND', 'this chat is no longer kept on the edge (it restarted, or newer chats took its place); press New chat to start over');
      }
      if (known?.turn) throw new AppError('FAILED_PRECONDITION', 'the last message is still being answered; wait for its reply or stop it');
      if (message === '') invalid('the message is empty; type something to send');
      const marked = messagePrivateTexts(form, typed);
      const id = known?.id ?? crypto.randomUUID();
      const conversation: ChatMessage[] = [
        ...(system === '' ? [] : [{ role: 'system' as const, content: system }]),
        ...(known?.messages ?? []).map(({ role, content }) => ({ role, content })),
        { role: 'user', content: message },
      ];
      const { text, ids } = chat.prompt(conversation);
      // The chat's id is its routing key too: its turns reach the cloud worker that holds their prefix.
      const fields = Object.fromEntries(Object.entries(form).filter(([name]) => !CHAT_FIELDS.has(name)));
      const privateTexts = [...(known ? chats.privateTexts(known) : []), ...marked];
      const raw = { ...readGenerationRequest({ ...fields, prompt: text, conversation: id }, 'form'), ...(privateTexts.length > 0 ? { privateTexts } : {}) };
      const run: PageRun = await pending.add(raw, { promptIds: ids, chatTurn: { commit: (reply) => chats.commit(id, run.id, reply) } });
      chats.begin(known ?? chats.create(id), run.id, message, marked);
      void run.over.then(() => chats.settle(id, run.id));
      return c.html(
        <>
          <UserTurn message={message} privateTexts={marked.map((t) => t.text)} />
          <AssistantTurn id={run.id} request={run.request} />
          <SendButton disabled oob />
          {known ? null : <ChatIdInput id={id} oob />}
        </>,
      );
    } catch (e) {
      if (!isAppError(e)) throw e;
      return c.html(<RefusedTurn message={message} error={e.message} />, httpStatus(e.code));
    }
  });

  routes.post('/chat/reset', async (c) => {
    const runId = chats.forget(formText(await readForm(c), 'chat'));
    if (runId !== undefined && !pending.stop(runId)) runtime.stop(runId);
    return c.html(
      <>
        <EmptyChat />
        <ChatIdInput id="" oob />
      </>,
    );
  });

  return routes;
}
