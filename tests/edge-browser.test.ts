/**
 * Code that runs inside the page is passed as strings: it is browser code, outside this project's types.
 *
 * The web page in a real browser (Debian's chromium through playwright-core) against a real HTTP server
 * on loopback: streaming, red cloud tokens, the metrics panel, Stop, compare, phone width, generated
 * markup shown as text, fallback tokens when the cloud is down, and the cloud's connection state.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import type { CloudClient, CloudConversation, CloudStepRequest } from '../src/edge/cloud/cloud-client.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { ARTIFACTS_DIR, launchBrowser } from './helpers/browser.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

/** Wraps the in-process cloud with a per-step delay, so a generation lasts long enough to be stopped. */
function slowCloud(inner: CloudClient, delayMs: number, state: { open: number }): CloudClient {
  return {
    openConversation(options) {
      const session: CloudConversation = inner.openConversation(options);
      state.open++;
      let closed = false;
      return {
        async next(request: CloudStepRequest) {
          await Bun.sleep(delayMs);
          return session.next(request);
        },
        async close() {
          if (!closed) state.open--;
          closed = true;
          await session.close();
        },
      };
    },
    state: () => inner.state(),
    close: () => inner.close(),
  };
}

/**
 * A cloud that answers the step for generated token k with `ids()[k]`: it lets a test choose exactly what
 * the page receives (the ids still go through the edge's tokenizer and stream decoder to become text).
 */
function scriptedCloud(ids: () => readonly number[]): CloudClient {
  return {
    openConversation: () => ({
      async next(request: CloudStepRequest) {
        const id = ids()[request.tokenIndex]!;
        return { tokens: [id], text: '', logprobs: [0], topAlternatives: [[]], cachedTokens: 0, backendMs: 0, shimMs: 0 };
      },
      async close() {},
    }),
    state: () => 'ready',
    close: async () => {},
  };
}

/** The page of `runtime` on a loopback port. */
function servePage(testEdge: TestEdge): { server: ReturnType<typeof Bun.serve>; base: string } {
  const pageServer = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createEdgeApp(testEdge.runtime, { maxBodyBytes: 65536 }).fetch, idleTimeout: 0 });
  return { server: pageServer, base: `http://127.0.0.1:${pageServer.port}` };
}

/** A loopback port nothing listens on (the OS picks it; it is closed again at once). */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** The header's cloud state, which the page refreshes every 3 s. */
async function waitForCloudState(on: Page, pattern: RegExp): Promise<string> {
  await on.waitForFunction(`${pattern}.test(document.querySelector('.cloud-state').textContent)`, undefined, { timeout: 10_000 });
  return (await on.locator('.cloud-state').textContent())!;
}

let edge: TestEdge;
let server: ReturnType<typeof Bun.serve>;
let browser: Browser;
let page: Page;
let base: string;
const cloudConversations = { open: 0 };

beforeAll(async () => {
  edge = await startTestEdge({ cloud: (inProcess) => slowCloud(inProcess, 15, cloudConversations), maxConcurrent: 4 });
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createEdgeApp(edge.runtime, { maxBodyBytes: 65536 }).fetch, idleTimeout: 0 });
  base = `http://127.0.0.1:${server.port}`;
  browser = await launchBrowser();
  page = await browser.newPage();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
  await edge?.release();
});

async function generate(options: { mode: string; threshold?: string; max_new_tokens?: string; prompt?: string; on?: Page; base?: string }) {
  const target = options.on ?? page;
  await target.goto((options.base ?? base) + '/');
  await target.fill('#prompt', options.prompt ?? 'Once upon a time');
  await target.check(`input[name=mode][value=${options.mode}]`);
  if (options.threshold) await target.locator('#threshold').fill(options.threshold);
  await target.fill('#max_new_tokens', options.max_new_tokens ?? '24');
  await target.click('button[type=submit]');
}

test('small_only: tokens stream in, none red, metrics panel filled', async () => {
  await generate({ mode: 'small_only' });
  await page.waitForSelector('[data-finish]');
  expect(await page.locator('.output .tok').count()).toBe(24);
  expect(await page.locator('.output .tok-llm').count()).toBe(0);
  expect(await page.locator('[data-metric=routed]').getAttribute('data-value')).toBe('0');
  expect(await page.locator('[data-finish]').getAttribute('data-finish')).toBe('length');
});

test('joint at a high threshold: red tokens, routed count equals red tokens, hover shows the score', async () => {
  await generate({ mode: 'joint', threshold: '0.9' });
  expect(await page.locator('#threshold-value').textContent()).toBe('0.90');
  await page.waitForSelector('[data-finish]');
  const red = await page.locator('.output .tok-llm').count();
  expect(red).toBeGreaterThan(0);
  expect(Number(await page.locator('[data-metric=routed]').getAttribute('data-value'))).toBe(red);
  expect(await page.locator('.output .tok-llm').first().getAttribute('title')).toMatch(
    /^cloud model · router score 0\.\d{3} \(below τ 0\.90\) · edge \d+\.\d ms, router \d+\.\d ms, cloud \d+\.\d ms$/,
  );
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-joint.png'), fullPage: true });
});

test('Stop mid-generation ends the stream and releases the server session', async () => {
  await generate({ mode: 'joint', threshold: '1', max_new_tokens: '400' });
  await page.waitForFunction("document.querySelectorAll('.output .tok').length >= 5");
  expect(edge.runtime.activeCount).toBe(1);
  await page.click('.run-head button');
  await page.waitForSelector('[data-finish=cancelled]');
  const shown = await page.locator('.output .tok').count();
  expect(shown).toBeLessThan(400);
  for (let i = 0; i < 50 && (edge.runtime.activeCount > 0 || cloudConversations.open > 0); i++) await Bun.sleep(20);
  expect(edge.runtime.activeCount).toBe(0);
  expect(cloudConversations.open).toBe(0);
  expect(edge.edgeModel.stats.liveSequences).toBe(0);
  expect(await page.locator('.run-head button').isDisabled()).toBe(true);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-stopped.png'), fullPage: true });
});

test('compare view runs small_only, then joint', async () => {
  await page.goto(base + '/compare');
  await page.fill('#prompt', 'The little cat');
  await page.locator('#threshold').fill('0.8');
  await page.fill('#max_new_tokens', '16');
  await page.click('button[type=submit]');
  await page.waitForFunction("document.querySelectorAll('[data-finish]').length === 2");
  const runs = page.locator('.run');
  expect(await runs.count()).toBe(2);
  expect(await runs.nth(0).locator('.tok-llm').count()).toBe(0);
  expect(await runs.nth(1).locator('.tok-llm').count()).toBeGreaterThan(0);
});

test('a validation error is shown in the page', async () => {
  await page.goto(base + '/');
  await page.fill('#prompt', 'Hi');
  await page.fill('#max_new_tokens', '0');
  // The browser's own check would block the form; an API client would not, so bypass it.
  await page.evaluate("document.querySelector('form').setAttribute('novalidate', '')");
  await page.click('button[type=submit]');
  await page.waitForSelector('#runs [role=alert]');
  expect(await page.locator('#runs [role=alert]').textContent()).toContain('max_new_tokens must be an integer in [1, 1024]');
});

test('usable at phone width (no sideways scroll with a finished run on the page) and by keyboard; no failed loads', async () => {
  const phone = await browser.newPage({ viewport: { width: 375, height: 740 } });
  const failed: string[] = [];
  phone.on('response', (r) => {
    if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
  });
  await generate({ mode: 'joint', threshold: '0.9', max_new_tokens: '40', on: phone });
  await phone.waitForSelector('[data-finish]');
  expect(await phone.locator('[data-metric=tbt]').count()).toBe(1);
  const widths = await phone.evaluate<{ scroll: number; inner: number }>('({ scroll: document.documentElement.scrollWidth, inner: innerWidth })');
  expect(widths.inner).toBe(375);
  expect(widths.scroll).toBeLessThanOrEqual(widths.inner);
  await phone.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-phone-run.png'), fullPage: true });
  // The browser asked for the favicon (a 404 there shows in its console) and got it.
  expect(failed).toEqual([]);
  await phone.goto(base + '/');
  await phone.focus('#prompt');
  await phone.keyboard.press('Tab');
  expect(await phone.evaluate<string>('document.activeElement.id')).toBe('threshold');
  await phone.keyboard.press('ArrowRight');
  expect(await phone.locator('#threshold-value').textContent()).toBe('0.51');
  await phone.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-phone.png'), fullPage: true });
  await phone.close();
});

describe('generated markup is shown as text', () => {
  const MARKUP = '<img src=x onerror="window.__injected = 1"><script>window.__injected = 2</script>';
  let markupEdge: TestEdge;
  let markupPage: { server: ReturnType<typeof Bun.serve>; base: string };
  let ids: number[] = [];

  beforeAll(async () => {
    // The stories model never writes markup; its tokenizer's byte-fallback pieces can spell any text, so a
    // cloud that returns those ids makes the page receive exactly this markup as generated text.
    markupEdge = await startTestEdge({ cloud: () => scriptedCloud(() => ids) });
    ids = markupEdge.runtime.engine.tokenizer.encode(MARKUP, { addBos: false, parseSpecialTokens: false });
    expect(markupEdge.runtime.engine.tokenizer.decode(ids)).toContain(MARKUP);
    markupPage = servePage(markupEdge);
  }, 60_000);

  afterAll(async () => {
    markupPage?.server.stop(true);
    await markupEdge?.release();
  });

  test('no element injected, no script run, the markup visible literally (prompt and generated text)', async () => {
    const prompt = '<b id="injected-prompt">bold</b><img src=y onerror="window.__injected = 3">';
    await generate({ mode: 'llm_only', prompt, max_new_tokens: String(ids.length), base: markupPage.base });
    await page.waitForSelector('[data-finish]');
    expect(await page.locator('[data-finish]').getAttribute('data-finish')).toBe('length');
    expect(await page.locator('.output .tok-llm').count()).toBe(ids.length);
    expect(await page.evaluate<number>("document.querySelectorAll('.output img, .output script, .output b, #injected-prompt').length")).toBe(0);
    // Give a broken image's onerror the chance to run, had an <img> been created.
    await page.evaluate('new Promise((resolve) => setTimeout(resolve, 200))');
    expect(await page.evaluate<string>('typeof window.__injected')).toBe('undefined');
    const shown = (await page.locator('.output').textContent())!;
    expect(shown).toContain(prompt);
    expect(shown).toContain(MARKUP);
    await page.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-markup-as-text.png'), fullPage: true });
  });

  test("a newline from the cloud shows as a ↵ in the token's colour; the text keeps the newline", async () => {
    const text = 'in the park.\nThe end';
    ids = markupEdge.runtime.engine.tokenizer.encode(text, { addBos: false, parseSpecialTokens: false });
    await generate({ mode: 'llm_only', prompt: 'They played', max_new_tokens: String(ids.length), base: markupPage.base });
    await page.waitForSelector('[data-finish]');
    const marker = page.locator('.output .tok-llm .nl');
    expect(await marker.count()).toBe(1);
    const look = await page.evaluate<{ content: string; color: string; token: string }>(
      "(() => { const nl = document.querySelector('.output .tok-llm .nl'); return { content: getComputedStyle(nl, '::before').content, color: getComputedStyle(nl, '::before').color, token: getComputedStyle(nl.parentElement).color }; })()",
    );
    expect(look.content).toBe('"↵"');
    expect(look.color).toBe(look.token);
    // (The tokenizer puts its word-start space before the first piece.)
    expect(await page.locator('.output').textContent()).toBe(`They played ${text}`);
    await page.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-newline.png'), fullPage: true });
  });
});

describe('the cloud connection in the page', () => {
  let shim: ShimServer;
  let upEdge: TestEdge;
  let downEdge: TestEdge;
  let upPage: { server: ReturnType<typeof Bun.serve>; base: string };
  let downPage: { server: ReturnType<typeof Bun.serve>; base: string };

  beforeAll(async () => {
    shim = await startTestShim();
    const deadAddress = `127.0.0.1:${await closedPort()}`;
    // Both edges talk to their cloud the way `bun run edge` does: the gRPC client with its circuit breaker.
    upEdge = await startTestEdge({ cloud: () => new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 5_000 }) });
    downEdge = await startTestEdge({ cloud: () => new GrpcCloudClient({ address: deadAddress, stepTimeoutMs: 2_000 }) });
    upPage = servePage(upEdge);
    downPage = servePage(downEdge);
  }, 60_000);

  afterAll(async () => {
    upPage?.server.stop(true);
    downPage?.server.stop(true);
    await upEdge?.release();
    await downEdge?.release();
    await shim?.shutdown(1000);
  });

  test('the header shows idle before the first routed token and ready once the shim served one', async () => {
    const tab = await browser.newPage();
    try {
      await tab.goto(upPage.base + '/');
      expect(await waitForCloudState(tab, /cloud: \w/)).toBe('cloud: idle');
      await generate({ mode: 'joint', threshold: '0.9', max_new_tokens: '16', on: tab, base: upPage.base });
      await tab.waitForSelector('[data-finish]');
      expect(await tab.locator('.output .tok-llm').count()).toBeGreaterThan(0);
      expect(await tab.locator('.output .tok-fallback').count()).toBe(0);
      expect(await waitForCloudState(tab, /cloud: ready/)).toBe('cloud: ready');
      expect(await tab.locator('.cloud-state > span.cloud-ready').count()).toBe(1);
      await tab.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-cloud-ready.png'), fullPage: true });
    } finally {
      await tab.close();
    }
  });

  test('with the cloud down, routed tokens are marked as fallback and the header says so', async () => {
    const tab = await browser.newPage();
    try {
      await generate({ mode: 'joint', threshold: '1', max_new_tokens: '12', on: tab, base: downPage.base });
      await tab.waitForSelector('[data-finish]');
      expect(await tab.locator('[data-finish]').getAttribute('data-finish')).toBe('length');
      expect(await tab.locator('.output .tok-fallback').count()).toBe(12);
      expect(await tab.locator('.output .tok-llm, .output .tok-slm').count()).toBe(0);
      expect(await tab.locator('[data-metric=fallback]').textContent()).toBe('12');
      expect(await tab.locator('.output .tok-fallback').first().getAttribute('title')).toMatch(
        /^edge model \(cloud unreachable\) · router score 0\.\d{3} \(below τ 1\.00\) · edge [^·]+ · \S/,
      );
      // Marked differently from the edge model's own tokens: dashed underline (and its own colour).
      const style = (selector: string) =>
        tab.evaluate<{ line: string; decoration: string; color: string }>(
          `(() => { const s = getComputedStyle(document.querySelector(${JSON.stringify(selector)})); return { line: s.textDecorationLine, decoration: s.textDecorationStyle, color: s.color }; })()`,
        );
      const fallback = await style('.output .tok-fallback');
      expect(fallback).toMatchObject({ line: 'underline', decoration: 'dashed' });
      // The underline is the word's only: a token's leading space sits before its span, unmarked.
      const spaced = await tab.evaluate<{ inSpans: number; between: number }>(
        "(() => { const out = document.querySelector('.output'); return { inSpans: [...out.querySelectorAll('.tok-fallback')].filter((t) => /^\\s+\\S/.test(t.textContent)).length, between: [...out.childNodes].filter((n) => n.nodeType === 3 && /^ +$/.test(n.data)).length }; })()",
      );
      expect(spaced.inSpans).toBe(0);
      expect(spaced.between).toBeGreaterThan(0);
      const state = await waitForCloudState(tab, /cloud: (unavailable|circuit-open)/);
      expect(['cloud: unavailable', 'cloud: circuit-open']).toContain(state);
      await tab.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-cloud-down.png'), fullPage: true });
      // The same page with the edge model's own tokens, for the colour comparison.
      await generate({ mode: 'small_only', max_new_tokens: '4', on: tab, base: downPage.base });
      await tab.waitForSelector('[data-finish]');
      const own = await style('.output .tok-slm');
      expect(own.line).toBe('none');
      expect(own.color).not.toBe(fallback.color);
    } finally {
      await tab.close();
    }
  });
});

describe("a token's score on a phone and a desktop", () => {
  const SIZES = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

  /** What the page shows of each heat-line bar and of the token it stands for. */
  interface BarView {
    index: number;
    barClass: string;
    fill: string;
    tick: number;
    height: number;
    source: string;
    score: number;
  }
  const BARS_SCRIPT = `[...document.querySelectorAll('.heat-bar')].map((bar) => {
    const token = document.querySelector('.tok[data-index="' + bar.dataset.index + '"]');
    return { index: Number(bar.dataset.index), barClass: bar.className, fill: bar.style.getPropertyValue('--score'), tick: parseFloat(getComputedStyle(bar, '::after').bottom),
      height: bar.getBoundingClientRect().height, source: token.dataset.source, score: Number(token.dataset.score) };
  })`;

  for (const [size, viewport] of Object.entries(SIZES)) {
    test(`${size} (${viewport.width}×${viewport.height}): a tap shows a token's score, source and timings; a heat line with τ marked; the select styled like the inputs`, async () => {
      const context = await browser.newContext({ viewport, hasTouch: true, isMobile: size === 'phone', deviceScaleFactor: 2 });
      try {
        const tab = await context.newPage();
        await tab.goto(base + '/');
        const look = (selector: string) =>
          tab.evaluate<Record<string, string | number>>(
            `(() => { const e = document.querySelector(${JSON.stringify(selector)}); const s = getComputedStyle(e); return { appearance: s.appearance, font: s.font, border: s.border, radius: s.borderRadius, background: s.backgroundColor, width: Math.round(e.getBoundingClientRect().width), height: Math.round(e.getBoundingClientRect().height) }; })()`,
          );
        const select = await look('#speculate');
        const input = await look('#temperature');
        expect(select.appearance).toBe('none');
        expect({ ...select, appearance: '' }).toEqual({ ...input, appearance: '' });

        await generate({ mode: 'joint', threshold: '0.9', max_new_tokens: '32', on: tab });
        await tab.waitForSelector('[data-finish]');
        expect(await tab.locator('.output .tok').count()).toBe(32);

        const bars = await tab.evaluate<BarView[]>(BARS_SCRIPT);
        expect(bars.map((b) => b.index)).toEqual([...Array(32).keys()]);
        for (const bar of bars) {
          expect(bar.barClass).toBe(`heat-bar heat-${bar.source}`);
          expect(Math.abs(parseFloat(bar.fill) - bar.score * 100)).toBeLessThan(0.06);
          // τ's mark: 0.9 of the bar's height from its foot, on every bar.
          expect(Math.abs(bar.tick - 0.9 * bar.height)).toBeLessThan(1);
          // Joint routes a token whose score is below τ (scores shown to 3 decimals).
          if (bar.source === 'llm') expect(bar.score).toBeLessThanOrEqual(0.9005);
          else expect(bar.score).toBeGreaterThanOrEqual(0.8995);
        }
        expect(bars.some((b) => b.source === 'llm')).toBe(true);
        expect(bars.some((b) => b.source === 'slm')).toBe(true);
        expect(await tab.locator('.heat figcaption').textContent()).toContain('the line is τ 0.90');
        expect(await tab.locator('.heat-tau').textContent()).toBe('τ');

        const detail = tab.locator('[data-testid=token-detail]');
        const routed = tab.locator('.output .tok-llm').first();
        await routed.tap();
        expect(await detail.textContent()).toMatch(
          /^cloud model · router score 0\.\d{3} \(below τ 0\.90\) · edge \d+\.\d ms, router \d+\.\d ms, cloud \d+\.\d ms$/,
        );
        expect(await detail.textContent()).toBe((await routed.getAttribute('data-detail'))!);
        expect(await routed.getAttribute('class')).toContain('selected');

        // The bar of an edge token selects that token instead.
        const edgeBar = tab.locator('.heat-bar.heat-slm').first();
        const index = (await edgeBar.getAttribute('data-index'))!;
        await edgeBar.tap();
        expect(await detail.textContent()).toMatch(/^edge model · router score 0\.\d{3} \(at or above τ 0\.90\) · edge \d+\.\d ms, router \d+\.\d ms$/);
        expect(await tab.locator('.output .tok.selected').getAttribute('data-index')).toBe(index);
        expect(await tab.locator('.heat-bar.selected').getAttribute('data-index')).toBe(index);
        expect(await tab.locator('.selected').count()).toBe(2);

        const box = (await detail.boundingBox())!;
        expect(box.x + box.width).toBeLessThanOrEqual(viewport.width);
        expect(await tab.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(viewport.width);
        await tab.screenshot({ path: join(ARTIFACTS_DIR, `edge-page-token-detail-${size}.png`), fullPage: true });
        await tab.locator('.heat').screenshot({ path: join(ARTIFACTS_DIR, `edge-page-heat-line-${size}.png`) });
      } finally {
        await context.close();
      }
    });
  }

  describe('with the cloud writing punctuation', () => {
    const TEXT = 'Once, there was a cat. The cat, Tom, sat.';
    let scriptedEdge: TestEdge;
    let scripted: { server: ReturnType<typeof Bun.serve>; base: string };
    let ids: number[] = [];

    beforeAll(async () => {
      scriptedEdge = await startTestEdge({ cloud: () => scriptedCloud(() => ids) });
      ids = scriptedEdge.runtime.engine.tokenizer.encode(TEXT, { addBos: false, parseSpecialTokens: false });
      scripted = servePage(scriptedEdge);
    }, 60_000);

    afterAll(async () => {
      scripted?.server.stop(true);
      await scriptedEdge?.release();
    });

    test('a routed "," is tinted and ringed; a cloud token\'s marking covers its word, not the space before it', async () => {
      const context = await browser.newContext({ viewport: SIZES.desktop, deviceScaleFactor: 2 });
      try {
        const tab = await context.newPage();
        // τ 1 routes every token, so the whole text is the cloud's.
        await generate({ mode: 'joint', threshold: '1', prompt: 'Hi', max_new_tokens: String(ids.length), on: tab, base: scripted.base });
        await tab.waitForSelector('[data-finish]');
        expect(await tab.locator('.output .tok-llm').count()).toBe(ids.length);
        expect(await tab.locator('.output').textContent()).toBe(`Hi ${TEXT}`);
        const commas = await tab.evaluate<{ text: string; classes: string; background: string; ring: string }[]>(
          "[...document.querySelectorAll('.output .tok-llm')].filter((t) => t.textContent === ',').map((t) => { const s = getComputedStyle(t); return { text: t.textContent, classes: t.className, background: s.backgroundColor, ring: s.boxShadow }; })",
        );
        expect(commas.length).toBe(3);
        for (const comma of commas) {
          expect(comma.classes).toBe('tok tok-llm tok-punct');
          expect(comma.background).not.toBe('rgba(0, 0, 0, 0)');
          expect(comma.ring).toMatch(/inset/);
        }
        // A word token's span starts at its first letter; the space is a text node of its own.
        expect(await tab.evaluate<number>("[...document.querySelectorAll('.output .tok')].filter((t) => /^\\s+\\S/.test(t.textContent)).length")).toBe(0);
        await tab.locator('.output').screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-routed-punctuation.png') });
      } finally {
        await context.close();
      }
    });
  });
});
