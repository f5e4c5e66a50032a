/**
 * Code that runs inside the page is passed as strings: it is browser code, outside this project's types.
 *
 * The page's side of private spans (issue 49): Mark private under the Generate prompt and the chat's message
 * box, the `private_spans` field it writes (code points, while a selection counts UTF-16 units), marks that
 * follow edits around them and go when their own text is edited, a chat that keeps each message's marks for
 * every later turn, and "What the cloud saw" with "Sent to the cloud" under each answer. Tables for the pure
 * helpers (views/private-spans.js, views/marked-text.tsx, views/cloud-saw.tsx); the chat's form through the
 * app; and in a real browser (Debian's chromium through playwright-core) on the demo packs with a chat
 * template, the builtin router and the in-process cloud, at τ 0.9 so most tokens are routed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import type { TextDetector } from '../src/edge/privacy/private-request.ts';
import { DEFAULT_LIMITS } from '../src/edge/request/generation-request.ts';
import { loadRouter, type Router } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';
import { byteText, cloudSentText } from '../views/cloud-saw.tsx';
import { privateSegments } from '../views/marked-text.tsx';
import { addMark, codePointOffset, followEdit, spansField, type Mark } from '../views/private-spans.js';
import type { ViewCloudReport } from '../views/view-model.ts';
import { ARTIFACTS_DIR, launchBrowser } from './helpers/browser.ts';
import { makeChatPack } from './helpers/chat-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { readSse } from './helpers/sse-client.ts';

describe('views/private-spans.js', () => {
  test('codePointOffset: UTF-16 offsets to code points; an emoji is two units and one point', () => {
    const cases: [string, number, number][] = [
      ['abc', 0, 0],
      ['abc', 2, 2],
      ['😀 Lily', 2, 1],
      ['😀 Lily', 3, 2],
      ['😀 Lily', 7, 6],
      ['a😀😀b', 5, 3],
      // Inside a pair: the whole pair counts.
      ['😀x', 1, 1],
      ['é', 1, 1],
      ['', 4, 0],
    ];
    for (const [text, at, points] of cases) expect({ text, at, points: codePointOffset(text, at) }).toEqual({ text, at, points });
  });

  const lily = '😀 Lily went to the park. Lily saw';
  const mark = (start: number, end: number, kind = 'name', text = lily): Mark => ({ start, end, kind, text: text.slice(start, end) });

  test('addMark: trims spaces, widens to whole code points, merges what it overlaps, keeps order; says why when nothing is marked', () => {
    const cases: [string, Mark[], number, number, string, Mark[] | string][] = [
      ['a selection', [], 3, 7, 'name', [mark(3, 7)]],
      ['spaces around it are left out', [], 2, 8, 'name', [mark(3, 7)]],
      ['half an emoji widens to all of it', [], 1, 2, 'private', [mark(0, 2, 'private')]],
      ['before an earlier mark, in order', [mark(20, 24)], 3, 7, 'name', [mark(3, 7), mark(20, 24)]],
      ['touching is not overlapping', [mark(3, 5)], 5, 7, 'name', [mark(3, 5), mark(5, 7)]],
      ['an overlap merges, with the new kind', [mark(3, 7), mark(13, 15)], 5, 14, 'private', [mark(3, 15, 'private')]],
      ['a mark it covers merges too', [mark(3, 7), mark(26, 30)], 0, 12, 'private', [mark(0, 12, 'private'), mark(26, 30)]],
      ['no selection', [], 4, 4, 'name', 'Select the private text in the box first, then press Mark private.'],
      ['only spaces', [], 2, 3, 'name', 'The selection holds only spaces; select a word or a number.'],
    ];
    for (const [what, marks, start, end, kind, want] of cases) {
      const got = addMark(lily, marks, start, end, kind);
      expect({ what, got: got.error ?? got.marks }).toEqual({ what, got: want });
      if (got.error) expect(got.marks).toBe(marks);
    }
  });

  test('followEdit: a mark moves with edits before it, stays with edits after it, and is dropped when its own text is edited', () => {
    const name = mark(3, 7);
    const cases: [string, string, Mark[], Mark[]][] = [
      ['typed before it', `Hi ${lily}`, [{ ...name, start: 6, end: 10 }], []],
      ['an emoji typed before it', `😀${lily}`, [{ ...name, start: 5, end: 9 }], []],
      ['deleted before it', lily.slice(2), [{ ...name, start: 1, end: 5 }], []],
      ['typed after it', `${lily}!`, [name], []],
      ['typed right after it', lily.slice(0, 7) + 's' + lily.slice(7), [name], []],
      ['typed right before it', lily.slice(0, 3) + 'x' + lily.slice(3), [{ ...name, start: 4, end: 8 }], []],
      ['typed inside it', lily.slice(0, 5) + 'l' + lily.slice(5), [], [name]],
      ['part of it deleted', lily.slice(0, 5) + lily.slice(6), [], [name]],
      ['the whole text replaced', 'Once upon a time', [], [name]],
      ['unchanged', lily, [name], []],
    ];
    for (const [what, after, kept, dropped] of cases) expect({ what, ...followEdit(lily, after, [name]) }).toEqual({ what, marks: kept, dropped });
  });

  test('followEdit: of two marks, the one the edit touched goes and the other moves', () => {
    const after = lily.replace('went', 'ran');
    expect(followEdit(lily, after, [mark(3, 7), mark(8, 12, 'private'), mark(26, 30)])).toEqual({
      marks: [mark(3, 7), { start: 25, end: 29, kind: 'name', text: 'Lily' }],
      dropped: [mark(8, 12, 'private')],
    });
  });

  test('spansField: the JSON of [start, end, kind] in code points, blank for none', () => {
    expect(spansField(lily, [])).toBe('');
    expect(spansField(lily, [mark(3, 7), mark(25, 29, 'private')])).toBe('[[2,6,"name"],[24,28,"private"]]');
    expect(spansField('a😀😀b c', [{ start: 7, end: 8, kind: 'name', text: 'c' }])).toBe('[[5,6,"name"]]');
  });
});

describe('views: marked text and what the cloud saw', () => {
  test('privateSegments: every occurrence of each value, overlapping and touching ones as one', () => {
    const cases: [string, string[], [string, boolean][]][] = [
      [
        'Lily met Lily',
        ['Lily'],
        [
          ['Lily', true],
          [' met ', false],
          ['Lily', true],
        ],
      ],
      ['Ann Lee Park', ['Ann Lee', 'Lee Park'], [['Ann Lee Park', true]]],
      [
        'AnnLee x',
        ['Ann', 'Lee'],
        [
          ['AnnLee', true],
          [' x', false],
        ],
      ],
      ['no values here', ['Lily', ' '], [['no values here', false]]],
      [
        'call 555 now',
        [' 555 '],
        [
          ['call ', false],
          ['555', true],
          [' now', false],
        ],
      ],
      ['', ['Lily'], [['', false]]],
    ];
    for (const [text, values, want] of cases) {
      expect({ text, got: privateSegments(text, values).map((s) => [s.text, s.private]) }).toEqual({ text, got: want });
    }
  });

  test('cloudSentText and byteText: the row "Sent to the cloud" in words', () => {
    const report = (r: Partial<ViewCloudReport>): ViewCloudReport => ({
      tokensSent: 0,
      bytesSent: 0,
      hiddenStateBytes: 0,
      steps: 0,
      streams: 0,
      placeholders: 0,
      withheldSteps: 0,
      ...r,
    });
    const cases: [ViewCloudReport, string][] = [
      [report({}), 'nothing'],
      [
        report({ tokensSent: 34, bytesSent: 586, steps: 23, streams: 1, placeholders: 1 }),
        '34 tokens (586 B), 1 placeholder, no hidden states, 0 positions kept home',
      ],
      [
        report({ tokensSent: 1, bytesSent: 12_345, hiddenStateBytes: 2_048_000, placeholders: 2, withheldSteps: 1 }),
        '1 token (12.3 kB), 2 placeholders, 2.0 MB of hidden states, 1 position kept home',
      ],
      [
        report({ tokensSent: 9, bytesSent: 200, placeholders: 1, withheldSteps: 2, gateBlockedSteps: 1 }),
        '9 tokens (200 B), 1 placeholder, no hidden states, 2 positions kept home, 1 step stopped by the last check',
      ],
    ];
    for (const [r, text] of cases) expect(cloudSentText(r)).toBe(text);
    expect([0, 999, 1000, 999_949, 1_000_000].map(byteText)).toEqual(['0 B', '999 B', '1.0 kB', '999.9 kB', '1.0 MB']);
  });
});

/** Finds emails, only when a request asks for it: the page offers a checkbox per kind the edge knows. */
const EMAIL_DETECTOR: TextDetector = {
  knownKinds: ['email'],
  detect: (text, extra = []) =>
    extra.includes('email') ? [...text.matchAll(/[\w.]+@[\w]+\.\w+/g)].map((m) => ({ start: m.index, end: m.index + m[0].length, kind: 'email' })) : [],
};

let pack: Awaited<ReturnType<typeof makeChatPack>>;
let edgeModel: DecoderModel;
let cloudModel: DecoderModel;
let router: Router;
let runtime: EdgeRuntime;
let app: ReturnType<typeof createEdgeApp>;
let server: ReturnType<typeof Bun.serve>;
let base: string;
let browser: Browser;
/** The forms the page posted (/runs and /chat/turns), as the server received them. */
const received: Record<string, string>[] = [];

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  pack = await makeChatPack();
  edgeModel = await DecoderModel.load(loadModelPack(pack.dir));
  cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
  router = await loadRouter(undefined);
  const tokenizer = await TextTokenizer.fromPack(pack.dir);
  runtime = new EdgeRuntime(
    { edgeModel, router, tokenizer, cloud: new InProcessCloud(cloudModel), privateDetector: EMAIL_DETECTOR },
    { ...DEFAULT_LIMITS, maxConcurrent: 4 },
  );
  app = createEdgeApp(runtime, { maxBodyBytes: 65536 });
  server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      if (request.method === 'POST' && (path === '/runs' || path === '/chat/turns'))
        received.push(Object.fromEntries(new URLSearchParams(await request.clone().text())));
      return app.fetch(request);
    },
  });
  base = `http://127.0.0.1:${server.port}`;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
  await runtime?.shutdown();
  await router?.release();
  await edgeModel?.release();
  await cloudModel?.release();
  pack?.remove();
});

function form(fields: Record<string, string>): RequestInit {
  return { method: 'POST', body: new URLSearchParams(fields), headers: { 'content-type': 'application/x-www-form-urlencoded', 'hx-request': 'true' } };
}

const runIdOf = (html: string) => html.match(/sse-connect="\/runs\/([0-9a-f-]+)\/events"/)![1]!;
const chatIdOf = (html: string) => html.match(/id="chat-id" name="chat" value="([0-9a-f-]+)"/)![1]!;

/** The text under "What the cloud saw" in a run's metrics event, unescaped. */
async function cloudTextOf(html: string): Promise<string> {
  const stream = readSse(await app.request(`/runs/${runIdOf(html)}/events`));
  await stream.ended;
  const figures = stream.events.find((e) => e.event === 'metrics')!.data;
  const pre = figures.match(/<pre>([\s\S]*)<\/pre>/);
  return pre ? unescape(pre[1]!) : '';
}

function unescape(html: string): string {
  return html.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&amp;', '&');
}

describe('through the app', () => {
  const turn = (fields: Record<string, string>) =>
    app.request('/chat/turns', form({ chat: '', mode: 'joint', threshold: '0.9', max_new_tokens: '8', temperature: '0', ...fields }));

  test("a chat message's private spans hold for every later turn: the cloud reads the placeholder in turn two, where nothing was marked", async () => {
    const first = await turn({ message: ' 😀 My friend Lily is sad.', private_spans: '[[13,17,"name"]]' });
    expect(first.status).toBe(200);
    const firstHtml = await first.text();
    // Trimmed like any message; the mark is highlighted in the bubble.
    expect(firstHtml).toStartWith(
      '<li class="turn turn-user" data-testid="user-turn"><p class="bubble">😀 My friend <mark class="private" title="private: the cloud reads a placeholder">Lily</mark> is sad.</p></li>',
    );
    const firstCloud = await cloudTextOf(firstHtml);
    expect(firstCloud).toContain('😀 My friend [NAME_1] is sad.');
    expect(firstCloud).not.toContain('Lily');

    const second = await turn({ chat: chatIdOf(firstHtml), message: 'What should Lily do?' });
    const secondCloud = await cloudTextOf(await second.text());
    expect(secondCloud).toContain('user: 😀 My friend [NAME_1] is sad.\n');
    expect(secondCloud).toContain('user: What should [NAME_1] do?\n');
    expect(secondCloud).not.toContain('Lily');
  });

  test('a chat message with bad private_spans is refused in place, naming the problem', async () => {
    const cases: [string, string][] = [
      ['[[0, 99]]', "Not sent: private_spans[0] = [0, 99) is not a non-empty range inside the text's 2 code points"],
      ['[nope', 'Not sent: private_spans must be a JSON list of [start, end] code-point ranges of the message, got "[nope"'],
      ['[[0, 1, "Name"]]', 'Not sent: private_spans[0]: kind must be lowercase letters'],
    ];
    for (const [spans, text] of cases) {
      const refused = await turn({ message: 'Hi', private_spans: spans });
      const html = unescape(await refused.text());
      expect({ status: refused.status, shown: html.includes(text) }).toEqual({ status: 400, shown: true });
    }
  });

  test('the Generate form offers the detector kinds the edge knows; a run asking for one hides what it finds', async () => {
    const page = await (await app.request('/')).text();
    expect(page).toContain('<input type="checkbox" name="private_detect" value="email"/> email');
    const posted = await app.request(
      '/runs',
      form({ prompt: 'Mail ann@example.org today.', mode: 'joint', threshold: '0.9', max_new_tokens: '4', temperature: '0', private_detect: 'email' }),
    );
    expect(posted.status).toBe(200);
    const cloud = await cloudTextOf(await posted.text());
    expect(cloud).toStartWith('Mail [EMAIL_1] today.');
  });
});

/** A phone as playwright's device descriptors set one up: touch, mobile viewport, a 2x screen. */
function open(viewport: { width: number; height: number }): Promise<BrowserContext> {
  const phone = viewport.width < 500;
  return browser.newContext({ viewport, hasTouch: phone, isMobile: phone, deviceScaleFactor: phone ? 2 : 1 });
}

/** Selects `count` characters of the box from `from` by keyboard, as a person would (an emoji is one key press). */
async function selectByKeys(tab: Page, box: string, from: number, count: number): Promise<void> {
  await tab.focus(box);
  await tab.keyboard.press('Control+Home');
  for (let i = 0; i < from; i++) await tab.keyboard.press('ArrowRight');
  for (let i = 0; i < count; i++) await tab.keyboard.press('Shift+ArrowRight');
}

const spansOf = (tab: Page, id: string) => tab.inputValue(`#${id}-spans`);
const chipsOf = (tab: Page, id: string) => tab.locator(`#${id}-list li mark`).allTextContents();

describe('in a browser', () => {
  test('Generate (1280×800): a name after an emoji marked, edits around it followed, its text never reaching the cloud', async () => {
    const context = await open({ width: 1280, height: 800 });
    try {
      const tab = await context.newPage();
      await tab.goto(`${base}/`);
      const block = 'prompt-private';
      const prompt = '😀 Lily went to the park. Mail ann@example.org. Lily saw';
      await tab.fill('#prompt', prompt);
      await tab.click(`#${block}-mark`);
      expect(await tab.locator(`#${block}-note`).textContent()).toBe('Select the private text in the box first, then press Mark private.');

      // The emoji is one key press and two UTF-16 units: the field counts it as one code point.
      await selectByKeys(tab, '#prompt', 2, 4);
      await tab.selectOption(`#${block}-kind`, 'name');
      await tab.click(`#${block}-mark`);
      expect(await chipsOf(tab, block)).toEqual(['Lily']);
      expect(await spansOf(tab, block)).toBe('[[2,6,"name"]]');
      expect(await tab.locator(`#${block}-note`).textContent()).toBe('');

      // Typed before the mark: it moves with its text.
      await tab.focus('#prompt');
      await tab.keyboard.press('Control+Home');
      await tab.keyboard.type('Hi ');
      expect(await spansOf(tab, block)).toBe('[[5,9,"name"]]');
      await selectByKeys(tab, '#prompt', 0, 3);
      await tab.keyboard.press('Backspace');
      expect(await spansOf(tab, block)).toBe('[[2,6,"name"]]');

      // A second mark, edited inside: it goes, and the page says so; the first stays.
      await selectByKeys(tab, '#prompt', 19, 4);
      await tab.selectOption(`#${block}-kind`, 'private');
      await tab.click(`#${block}-mark`);
      expect(await chipsOf(tab, block)).toEqual(['Lily', 'park']);
      expect(await spansOf(tab, block)).toBe('[[2,6,"name"],[19,23,"private"]]');
      await selectByKeys(tab, '#prompt', 21, 0);
      await tab.keyboard.type('x');
      expect(await chipsOf(tab, block)).toEqual(['Lily']);
      expect(await tab.locator(`#${block}-note`).textContent()).toBe('Unmarked “park”: the marked text was edited. Mark it again if it is still private.');
      await tab.keyboard.press('Backspace');
      expect(await tab.inputValue('#prompt')).toBe(prompt);

      // Marked and unmarked again with its chip's button.
      await selectByKeys(tab, '#prompt', 52, 3);
      await tab.click(`#${block}-mark`);
      expect(await chipsOf(tab, block)).toEqual(['Lily', 'saw']);
      await tab.click(`#${block}-list button[aria-label="Unmark “saw”"]`);
      expect(await chipsOf(tab, block)).toEqual(['Lily']);
      expect(await spansOf(tab, block)).toBe('[[2,6,"name"]]');

      await tab.check('[data-testid=private-detect] input[value=email]');
      await tab.check('input[name=mode][value=joint]');
      await tab.locator('#threshold').fill('0.9');
      await tab.fill('#max_new_tokens', '24');
      await tab.click('button[type=submit]');
      const run = tab.locator('#runs > .run');
      await run.locator('[data-finish]').waitFor();

      const sent = received.at(-1)!;
      expect({ prompt: sent.prompt, private_spans: sent.private_spans, private_detect: sent.private_detect }).toEqual({
        prompt,
        private_spans: '[[2,6,"name"]]',
        private_detect: 'email',
      });
      // The prompt shows what was marked, each occurrence.
      expect(await run.locator('.prompt mark.private').allTextContents()).toEqual(['Lily', 'Lily']);

      const row = run.locator('[data-metric=cloud-sent]');
      expect(await row.isVisible()).toBe(true);
      expect(await run.locator('[data-testid=metrics-summary] dt').last().textContent()).toBe('Sent to the cloud');
      expect(await row.getAttribute('data-placeholders')).toBe('2');
      expect(Number(await row.getAttribute('data-tokens'))).toBeGreaterThan(0);
      expect(await row.textContent()).toMatch(/^\d+ tokens \(\d+(\.\d)? k?B\), 2 placeholders, no hidden states, \d+ positions? kept home$/);
      const fold = run.locator('details[data-testid=cloud-text]');
      expect(await fold.locator('pre').isVisible()).toBe(false);
      await fold.locator('summary').click();
      const saw = (await fold.locator('pre').textContent())!;
      expect(saw).toStartWith('😀 [NAME_1] went to the park. Mail [EMAIL_1]. [NAME_1] saw');
      expect(saw).not.toContain('Lily');
      expect(saw).not.toContain('ann@example.org');
      // The answer on the page is the real text: the placeholders never show there.
      expect(await run.locator('.output').textContent()).not.toContain('[NAME_1]');
      await tab.locator('.controls').screenshot({ path: join(ARTIFACTS_DIR, 'page-private-marks.png') });
      await run.screenshot({ path: join(ARTIFACTS_DIR, 'page-cloud-saw.png') });
    } finally {
      await context.close();
    }
  }, 60_000);

  test('Chat (390×844): a name marked in the first message stays private in the second turn, which marks nothing', async () => {
    const context = await open({ width: 390, height: 844 });
    try {
      const tab = await context.newPage();
      await tab.goto(`${base}/chat`);
      await tab.locator('.chat-settings > summary').tap();
      await tab.locator('#chat-threshold').fill('0.9');
      await tab.fill('#chat-max-new-tokens', '12');
      await tab.locator('.chat-settings > summary').tap();
      const block = 'message-private';
      await tab.fill('#message', '😀 My friend Lily is sad.');
      await selectByKeys(tab, '#message', 12, 4);
      await tab.selectOption(`#${block}-kind`, 'name');
      await tab.locator(`#${block}-mark`).tap();
      expect(await chipsOf(tab, block)).toEqual(['Lily']);
      await tab.locator('#chat-send').tap();
      const replies = tab.locator('[data-testid=assistant-turn]');
      await replies.nth(0).locator('[data-finish]').waitFor();
      expect(received.at(-1)!.private_spans).toBe('[[12,16,"name"]]');
      // The message left the box, and its marks with it.
      expect(await tab.inputValue('#message')).toBe('');
      expect(await chipsOf(tab, block)).toEqual([]);
      expect(await spansOf(tab, block)).toBe('');
      expect(await tab.locator('[data-testid=user-turn] mark.private').allTextContents()).toEqual(['Lily']);

      await tab.fill('#message', 'What should Lily do?');
      await tab.locator('#chat-send').tap();
      await replies.nth(1).locator('[data-finish]').waitFor();
      expect(received.at(-1)!.private_spans).toBe('');
      const fold = replies.nth(1).locator('details[data-testid=cloud-text]');
      await fold.locator('summary').tap();
      const saw = (await fold.locator('pre').textContent())!;
      expect(saw).toContain('user: 😀 My friend [NAME_1] is sad.\n');
      expect(saw).toContain('user: What should [NAME_1] do?\n');
      expect(saw).not.toContain('Lily');
      expect(await replies.nth(1).locator('[data-metric=cloud-sent]').getAttribute('data-placeholders')).toBe('1');
      expect(await tab.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await tab.screenshot({ path: join(ARTIFACTS_DIR, 'page-chat-phone-cloud-saw.png') });
    } finally {
      await context.close();
    }
  }, 60_000);
});
