/**
 * Code that runs inside the page is passed as strings: it is browser code, outside this project's types.
 *
 * The page's chat (issue 48, item 2) on a chat-capable copy of the demo edge pack, with the trained router,
 * the in-process cloud and the edge's prompt cache on. Through the app: each bad message (empty, a role the
 * template refuses, a conversation past the context window, a chat the edge no longer holds, a second
 * message while the first is answered, no template at all) is a 4xx naming the problem, never a 500, and the
 * next message is served; Stop keeps the reply so far. In a real browser (Debian's chromium through playwright-core) at 1280 and 390 px:
 * five turns typed and sent, each reply streamed token by token with colours, scores and a heat line, the
 * fifth turn's prompt at least 80% restored from the cache (read from the page), Send off while a reply is
 * written and Stop keeping the reply so far, errors (a message larger than the body limit included) shown in place with
 * the next turn served, and New chat emptying the conversation; and the completion page of a pack without a
 * template offering no chat.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { EdgeChat } from '../src/edge/chat/edge-chat.ts';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { DEFAULT_LIMITS } from '../src/edge/request/generation-request.ts';
import { loadRouter, type Router } from '../src/edge/routing/router.ts';
import type { ChatMessage } from '../src/shared/text/chat-template.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { PrefixCache } from '../src/shared/model/prefix-cache.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';
import { interceptSteps } from '../src/edge/cloud/cloud-client.ts';
import { ARTIFACTS_DIR, launchBrowser } from './helpers/browser.ts';
import { makeChatPack, TEST_CHAT_TEMPLATE } from './helpers/chat-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';
import { readSse } from './helpers/sse-client.ts';

/** The test template, refusing a system message as Gemma's does: the role a template refuses. */
const NO_SYSTEM_TEMPLATE = `{% for message in messages %}{% if message.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}${TEST_CHAT_TEMPLATE}`;
/** Five messages; each width chats about its own animal, so neither restores the other's turns from the cache. */
const messagesAbout = (animal: string) => [
  `Tell me a story about a ${animal}.`,
  `What did the ${animal} eat?`,
  `Where did the ${animal} go next?`,
  `Who did the ${animal} meet there?`,
  'How did the story end?',
];
/** Far past the 512 positions of the demo model, well within the 16,384 characters a prompt may have. */
const TOO_LONG = 'The big red ball rolled down the hill. '.repeat(60);
/** Past the 65,536 bytes of body the app here takes (77,000 characters). */
const HUGE = 'A dog ran. '.repeat(7_000);
const PHONE = { width: 390, height: 844 } as const;
const DESKTOP = { width: 1280, height: 800 } as const;

let pack: Awaited<ReturnType<typeof makeChatPack>>;
let edgeModel: DecoderModel;
let cloudModel: DecoderModel;
let cloudDelayMs = 0;
let router: Router;
let runtime: EdgeRuntime;
let app: ReturnType<typeof createEdgeApp>;
let server: ReturnType<typeof Bun.serve>;
let base: string;
/** A pack without a chat template (the demo pack as it is), for the completion page. */
let plain: TestEdge;
let plainServer: ReturnType<typeof Bun.serve>;
let browser: Browser;
let chatOf: EdgeChat;

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  pack = await makeChatPack(NO_SYSTEM_TEMPLATE);
  edgeModel = await DecoderModel.load(loadModelPack(pack.dir));
  cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
  router = await loadRouter(demo.routerPack);
  const tokenizer = await TextTokenizer.fromPack(pack.dir);
  chatOf = EdgeChat.load(tokenizer, { modelName: 'stories260k-3l-chat' });
  const promptCache = new PrefixCache(edgeModel, { maxBytes: 64 * 2 ** 20 });
  // Routed steps wait `cloudDelayMs` (0 but where a test needs a reply slow enough to stop by hand).
  const cloud = interceptSteps(new InProcessCloud(cloudModel), async (request, next) => {
    if (cloudDelayMs > 0) await Bun.sleep(cloudDelayMs);
    return next(request);
  });
  runtime = new EdgeRuntime({ edgeModel, router, tokenizer, cloud, promptCache }, { ...DEFAULT_LIMITS, maxConcurrent: 4 });
  // The chat is the one createEdgeApp makes from the pack's own template.
  app = createEdgeApp(runtime, { maxBodyBytes: 65536 });
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: app.fetch, idleTimeout: 0 });
  base = `http://127.0.0.1:${server.port}`;
  plain = await startTestEdge();
  plainServer = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createEdgeApp(plain.runtime, { maxBodyBytes: 65536 }).fetch, idleTimeout: 0 });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
  plainServer?.stop(true);
  await runtime?.shutdown();
  await plain?.release();
  await router?.release();
  await edgeModel?.release();
  await cloudModel?.release();
  pack?.remove();
});

function form(fields: Record<string, string>): RequestInit {
  return { method: 'POST', body: new URLSearchParams(fields), headers: { 'content-type': 'application/x-www-form-urlencoded', 'hx-request': 'true' } };
}

/** Posts a message as the page's form does (`chat` '' starts a chat); the answer's status and fragment. */
async function send(fields: Record<string, string>, on = app): Promise<{ status: number; html: string }> {
  const res = await on.request('/chat/turns', form({ chat: '', mode: 'joint', max_new_tokens: '8', temperature: '0', ...fields }));
  return { status: res.status, html: await res.text() };
}

const chatIdOf = (html: string) => html.match(/id="chat-id" name="chat" value="([0-9a-f-]+)"/)![1]!;
const runIdOf = (html: string) => html.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;

/** Streams a turn's reply to its end; the SSE events. */
async function reply(html: string) {
  const stream = readSse(await app.request(`/runs/${runIdOf(html)}/events`));
  await stream.ended;
  return stream.events;
}

describe('a chat through the app', () => {
  test("a turn answers with the user's turn, the streaming reply, Send turned off and the new chat's id; its reply keeps the conversation going", async () => {
    const first = await send({ message: '  Tell me a story.  ' });
    expect(first.status).toBe(200);
    expect(first.html).toStartWith('<li class="turn turn-user" data-testid="user-turn"><p class="bubble">Tell me a story.</p></li>');
    expect(first.html).toContain('<article class="run reply"');
    expect(first.html).toContain('<button id="chat-send" type="submit" disabled="" hx-swap-oob="true">Send</button>');
    const chat = chatIdOf(first.html);
    const events = await reply(first.html);
    expect(events.filter((e) => e.event === 'token')).toHaveLength(8);
    const figures = events.find((e) => e.event === 'metrics')!.data;
    expect(figures).toMatch(
      /^<p class="prompt-cache" data-testid="prompt-cache" data-prompt-tokens="\d+" data-cached-tokens="\d+">prompt \d+ tokens, \d+ from cache<\/p><dl class="metrics-summary"/,
    );
    const end = events.at(-1)!;
    expect(end.event).toBe('end');
    expect(end.data).toContain('<span data-finish="length">');

    // The next turn's prompt is the conversation: the first reply (trimmed) as the assistant's message.
    const firstReply = events
      .filter((e) => e.event === 'token')
      .map((e) => e.data.replace(/<[^>]+>/g, ''))
      .join('');
    const second = await send({ chat, message: 'And then?' });
    expect(second.status).toBe(200);
    expect(second.html).not.toContain('id="chat-id"');
    const secondEvents = await reply(second.html);
    const prompt = Number(secondEvents.find((e) => e.event === 'metrics')!.data.match(/data-prompt-tokens="(\d+)"/)![1]);
    const conversation: ChatMessage[] = [
      { role: 'user', content: 'Tell me a story.' },
      { role: 'assistant', content: unescape(firstReply).trim() },
      { role: 'user', content: 'And then?' },
    ];
    expect(prompt).toBe(chatOf.prompt(conversation).ids.length);
  });

  test('bad messages are 4xx naming the problem, shown in place of the reply; the conversation is unchanged and the next message is served', async () => {
    const started = await send({ message: 'Hello there.' });
    const chat = chatIdOf(started.html);
    await reply(started.html);
    const cases: [Record<string, string>, number, string][] = [
      [{ chat, message: '   ' }, 400, 'Not sent: the message is empty; type something to send'],
      [{ chat, message: 'Hi', system: 'Be kind.' }, 400, "Not sent: the model's chat template refused these messages: System role not supported"],
      [{ chat, message: TOO_LONG }, 400, "the edge model's context window is 512 (including generated tokens)"],
      [{ chat: crypto.randomUUID(), message: 'Hi' }, 404, 'Not sent: this chat is no longer kept on the edge'],
      [{ chat, message: 'Hi', max_new_tokens: 'lots' }, 400, 'Not sent: max_new_tokens must be a number, got "lots"'],
    ];
    for (const [fields, status, text] of cases) {
      const refused = await send(fields);
      expect({ status: refused.status, text: unescape(refused.html).includes(text) }).toEqual({ status, text: true });
      expect(refused.html).toContain('data-testid="refused-turn"');
      // The next message is served, in the same chat.
      const next = await send({ chat, message: 'Go on.', max_new_tokens: '2' });
      expect(next.status).toBe(200);
      expect((await reply(next.html)).at(-1)!.data).toContain('data-finish="length"');
    }
  });

  test('a second message while the first is answered is a 409; New chat forgets the chat and stops its reply', async () => {
    const first = await send({ message: 'Tell me a long story.' });
    const chat = chatIdOf(first.html);
    const busy = await send({ chat, message: 'Hurry up.' });
    expect(busy.status).toBe(409);
    expect(busy.html).toContain('Not sent: the last message is still being answered; wait for its reply or stop it');
    const reset = await app.request('/chat/reset', form({ chat }));
    expect(reset.status).toBe(200);
    expect(await reset.text()).toContain('data-testid="empty-chat"');
    // The reply that never streamed was dropped with its chat; the chat is gone.
    expect((await reply(first.html)).at(-1)!.data).toContain('this generation is no longer running');
    expect((await send({ chat, message: 'Hello?' })).status).toBe(404);
    expect(runtime.activeCount).toBe(0);
  });

  test('Stop ends a reply; the text so far is kept as the reply, and the next turn follows it', async () => {
    const first = await send({ message: 'Tell me a very long story.', max_new_tokens: '400' });
    const chat = chatIdOf(first.html);
    const stream = readSse(await app.request(`/runs/${runIdOf(first.html)}/events`));
    await stream.waitFor((events) => events.filter((e) => e.event === 'token').length >= 3);
    expect((await app.request(`/runs/${runIdOf(first.html)}/stop`, { method: 'POST' })).status).toBe(204);
    await stream.ended;
    expect(stream.events.at(-1)!.data).toContain('data-finish="cancelled"');
    const partial = stream.events
      .filter((e) => e.event === 'token')
      .map((e) => e.data.replace(/<[^>]+>/g, ''))
      .join('');
    expect(partial.length).toBeGreaterThan(0);
    const next = await send({ chat, message: 'Shorter, please.' });
    const prompt = Number((await reply(next.html)).find((e) => e.event === 'metrics')!.data.match(/data-prompt-tokens="(\d+)"/)![1]);
    expect(prompt).toBe(
      chatOf.prompt([
        { role: 'user', content: 'Tell me a very long story.' },
        { role: 'assistant', content: unescape(partial).trim() },
        { role: 'user', content: 'Shorter, please.' },
      ]).ids.length,
    );
  });

  test('behind the access token like the rest of the page', async () => {
    const guarded = createEdgeApp(runtime, { maxBodyBytes: 65536, accessToken: 'secret' });
    expect((await guarded.request('/chat')).status).toBe(401);
    expect((await guarded.request('/chat/turns', form({ chat: '', message: 'Hi' }))).status).toBe(401);
    expect((await guarded.request('/chat/reset', form({ chat: '' }))).status).toBe(401);
    expect((await guarded.request('/chat', { headers: { authorization: 'Bearer secret' } })).status).toBe(200);
  });

  test('a pack without a chat template: no chat in the header, /chat a 404 saying why, and a message a 400 saying the same', async () => {
    const plainApp = createEdgeApp(plain.runtime, { maxBodyBytes: 65536 });
    expect(await (await plainApp.request('/')).text()).not.toContain('href="/chat"');
    expect(await (await app.request('/')).text()).toContain('<a href="/chat">Chat</a>');
    const page = await plainApp.request('/chat');
    expect(page.status).toBe(404);
    expect(await page.text()).toContain('has no chat template');
    const refused = await send({ message: 'Hi' }, plainApp);
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('has no chat template');
  });
});

function unescape(html: string): string {
  return html.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&amp;', '&');
}

/** A phone as playwright's device descriptors set one up: touch, mobile viewport, a 2x screen. */
function open(viewport: { width: number; height: number }): Promise<BrowserContext> {
  const phone = viewport.width < 500;
  return browser.newContext({ viewport, hasTouch: phone, isMobile: phone, deviceScaleFactor: phone ? 2 : 1 });
}

/** Counts, per run, the token events the page swapped in: one per token when the reply streams. */
const COUNT_TOKEN_SWAPS = `window.tokenSwaps = {};
  document.addEventListener('htmx:sseMessage', (e) => { if (e.detail.type === 'token') { const id = e.target.closest('.run').id; tokenSwaps[id] = (tokenSwaps[id] ?? 0) + 1; } });`;

interface Reply {
  tokens: number;
  swaps: number;
  bars: number;
  finish: string;
  text: string;
  promptTokens: number;
  cachedTokens: number;
  line: string;
}

/**
 * Types a message, sends it as that screen does (Enter with a keyboard and mouse, a tap on Send on a touch
 * screen, where Enter is a new line), and waits for the reply to end; what the page shows of it.
 */
async function chatTurn(tab: Page, message: string, turn: number): Promise<Reply> {
  await tab.fill('#message', message);
  if (tab.viewportSize()!.width < 500) await tab.tap('#chat-send');
  else await tab.press('#message', 'Enter');
  const last = tab.locator('[data-testid=assistant-turn]').nth(turn);
  await last.locator('[data-finish]').waitFor();
  expect(await tab.inputValue('#message')).toBe('');
  return tab.evaluate<Reply>(`(() => {
    const turn = document.querySelectorAll('[data-testid=assistant-turn]')[${turn}];
    const run = turn.querySelector('.run');
    const cache = turn.querySelector('[data-testid=prompt-cache]');
    return {
      tokens: run.querySelectorAll('.output .tok').length,
      swaps: tokenSwaps[run.id] ?? 0,
      bars: run.querySelectorAll('.heat-bar').length,
      finish: run.querySelector('[data-finish]').dataset.finish,
      text: run.querySelector('.output').textContent,
      promptTokens: Number(cache.dataset.promptTokens),
      cachedTokens: Number(cache.dataset.cachedTokens),
      line: cache.textContent,
    };
  })()`);
}

for (const [name, viewport, animal] of [
  ['desktop', DESKTOP, 'cat'],
  ['phone', PHONE, 'dog'],
] as const) {
  const MESSAGES = messagesAbout(animal);
  describe(`the chat in a browser, ${name} (${viewport.width}×${viewport.height})`, () => {
    test('five turns: each reply streams token by token with colours, scores and a heat line; the fifth restores at least 80% of its prompt from the cache; New chat empties the chat', async () => {
      const context = await open(viewport);
      try {
        const tab = await context.newPage();
        await tab.addInitScript(COUNT_TOKEN_SWAPS);
        await tab.goto(`${base}/chat`);
        expect(await tab.locator('[data-testid=empty-chat]').isVisible()).toBe(true);
        await tab.screenshot({ path: join(ARTIFACTS_DIR, `page-chat-${name}-empty.png`) });
        // A new line, not a message: Shift+Enter with a keyboard, Enter on a touch screen.
        await tab.fill('#message', 'Hello');
        await tab.press('#message', name === 'phone' ? 'Enter' : 'Shift+Enter');
        expect(await tab.inputValue('#message')).toBe('Hello\n');
        expect(await tab.locator('[data-testid=user-turn]').count()).toBe(0);
        const replies: Reply[] = [];
        const conversation: ChatMessage[] = [];
        for (const [i, message] of MESSAGES.entries()) {
          const shown = await chatTurn(tab, message, i);
          replies.push(shown);
          conversation.push({ role: 'user', content: message });
          // Streamed: one swap per token, each with its bar in the heat line.
          expect(shown.tokens).toBeGreaterThan(0);
          expect(shown.swaps).toBe(shown.tokens);
          expect(shown.bars).toBe(shown.tokens);
          expect(shown.line).toBe(`prompt ${shown.promptTokens} tokens, ${shown.cachedTokens} from cache`);
          // The prompt is the whole conversation, each earlier reply as the page showed it.
          expect(shown.promptTokens).toBe(chatOf.prompt(conversation).ids.length);
          conversation.push({ role: 'assistant', content: shown.text.trim() });
        }
        expect(await tab.locator('[data-testid=empty-chat]').isVisible()).toBe(false);
        expect(await tab.locator('[data-testid=user-turn]').allTextContents()).toEqual(MESSAGES);
        const fifth = replies[4]!;
        const share = fifth.cachedTokens / fifth.promptTokens;
        console.log(`${name}: fifth turn prompt ${fifth.promptTokens} tokens, ${fifth.cachedTokens} from cache (${(share * 100).toFixed(1)}%)`);
        expect(share).toBeGreaterThanOrEqual(0.8);
        // The cloud wrote some of it, and a tap on a token shows its score.
        expect(await tab.locator('.reply .tok-llm').count()).toBeGreaterThan(0);
        const token = tab.locator('[data-testid=assistant-turn]').nth(4).locator('.tok').first();
        await (name === 'phone' ? token.tap() : token.click());
        expect(await tab.locator('[data-testid=assistant-turn]').nth(4).locator('[data-testid=token-detail]').textContent()).toMatch(/router score \d\.\d{3}/);
        // The message box stays at the bottom of the screen; nothing is wider than the screen.
        const box = (await tab.locator('#composer').boundingBox())!;
        expect(box.y + box.height).toBeLessThanOrEqual(viewport.height + 1);
        expect(await tab.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(viewport.width);
        await tab.screenshot({ path: join(ARTIFACTS_DIR, `page-chat-${name}.png`) });

        await tab.click('#new-chat');
        await tab.locator('[data-testid=empty-chat]').waitFor();
        expect(await tab.locator('[data-testid=user-turn], [data-testid=assistant-turn]').count()).toBe(0);
        expect(await tab.inputValue('#chat-id')).toBe('');
        // A new chat: its prompt is its one message again.
        const fresh = await chatTurn(tab, 'Hello!', 0);
        expect(fresh.promptTokens).toBe(chatOf.prompt([{ role: 'user', content: 'Hello!' }]).ids.length);
      } finally {
        await context.close();
      }
    }, 60_000);

    test('Send is off while a reply is written; Stop keeps the reply so far, Send comes back, and the next turn follows the kept reply', async () => {
      const context = await open(viewport);
      try {
        const tab = await context.newPage();
        await tab.addInitScript(COUNT_TOKEN_SWAPS);
        await tab.goto(`${base}/chat`);
        await tab.click('.chat-settings > summary');
        // Every token from a cloud that takes 40 ms a step, up to the context window: seconds, long enough to be
        // stopped however busy the machine is (the edge alone writes the whole reply in well under a second).
        cloudDelayMs = 40;
        await tab.check('input[name=mode][value=llm_only]');
        await tab.fill('#chat-max-new-tokens', '1000');
        await tab.fill('#message', `A very long story about a ${animal}, please.`);
        await tab.click('#chat-send');
        await tab.waitForFunction("document.querySelectorAll('.reply .output .tok').length >= 5");
        expect(await tab.locator('#chat-send').isDisabled()).toBe(true);
        const reply = tab.locator('[data-testid=assistant-turn]').first();
        // Dispatched, not a pointer click: the streaming reply moves the button until it is stopped.
        await reply.locator('.run-head button').dispatchEvent('click');
        await reply.locator('[data-finish=cancelled]').waitFor();
        cloudDelayMs = 0;
        await tab.check('input[name=mode][value=joint]');
        expect(await tab.locator('#chat-send').isDisabled()).toBe(false);
        const kept = (await reply.locator('.output').textContent())!;
        await tab.fill('#chat-max-new-tokens', '16');
        const next = await chatTurn(tab, 'A shorter one.', 1);
        expect(next.promptTokens).toBe(
          chatOf.prompt([
            { role: 'user', content: `A very long story about a ${animal}, please.` },
            { role: 'assistant', content: kept.trim() },
            { role: 'user', content: 'A shorter one.' },
          ]).ids.length,
        );
      } finally {
        await context.close();
      }
    }, 60_000);

    test('errors show in place of the reply and the next turn is served: a conversation past the context window, a message larger than the body limit, a system prompt the template refuses', async () => {
      const context = await open(viewport);
      try {
        const tab = await context.newPage();
        await tab.addInitScript(COUNT_TOKEN_SWAPS);
        await tab.goto(`${base}/chat`);
        await chatTurn(tab, 'Tell me about a dog.', 0);

        await tab.fill('#message', TOO_LONG);
        await tab.click('#chat-send');
        const refused = tab.locator('[data-testid=refused-turn]');
        await refused.waitFor();
        expect(await refused.textContent()).toMatch(/^Not sent: prompt is \d+ tokens; the edge model's context window is 512/);
        // A refused message stays in the box to be edited.
        expect(await tab.inputValue('#message')).toBe(TOO_LONG);
        // Larger than the edge takes a request at all (issue 54, item 7f): refused in place too, not with the page's generic block.
        await tab.fill('#message', HUGE);
        await tab.click('#chat-send');
        await refused.nth(1).waitFor();
        expect(await refused.nth(1).textContent()).toBe('Not sent: the message is too long: the edge takes at most 65536 bytes a message, settings included');
        expect(await tab.inputValue('#message')).toBe(HUGE);
        expect(await tab.locator('#turns > :not(li)').count()).toBe(0);
        const second = await chatTurn(tab, 'What was his name?', 1);
        expect(second.tokens).toBeGreaterThan(0);

        await (name === 'phone' ? tab.locator('.chat-settings > summary').tap() : tab.click('.chat-settings > summary'));
        await tab.fill('#system', 'You are a storyteller.');
        await tab.fill('#message', 'Another one, please.');
        await tab.click('#chat-send');
        await refused.nth(2).waitFor();
        expect(await refused.nth(2).textContent()).toBe("Not sent: the model's chat template refused these messages: System role not supported");
        await tab.screenshot({ path: join(ARTIFACTS_DIR, `page-chat-${name}-error.png`) });
        await tab.fill('#system', '');
        const third = await chatTurn(tab, 'Another one, please.', 2);
        expect(third.tokens).toBeGreaterThan(0);
        // The refused messages are not part of the conversation.
        expect(third.promptTokens).toBe(
          chatOf.prompt([
            { role: 'user', content: 'Tell me about a dog.' },
            { role: 'assistant', content: (await tab.locator('[data-testid=assistant-turn] .output').nth(0).textContent())!.trim() },
            { role: 'user', content: 'What was his name?' },
            { role: 'assistant', content: second.text.trim() },
            { role: 'user', content: 'Another one, please.' },
          ]).ids.length,
        );
      } finally {
        await context.close();
      }
    }, 60_000);
  });
}

test('the completion page of a pack without a chat template offers no chat, in a browser', async () => {
  const context = await open(DESKTOP);
  try {
    const tab = await context.newPage();
    await tab.goto(`http://127.0.0.1:${plainServer.port}/`);
    expect(await tab.locator('header nav a').allTextContents()).toEqual(['Generate', 'Compare']);
    expect(await tab.locator('#chat, #composer').count()).toBe(0);
    expect(await tab.locator('#prompt').isVisible()).toBe(true);
    const chat = await tab.goto(`http://127.0.0.1:${plainServer.port}/chat`);
    expect(chat!.status()).toBe(404);
    expect(await tab.locator('.error').textContent()).toContain('has no chat template');
  } finally {
    await context.close();
  }
}, 30_000);
