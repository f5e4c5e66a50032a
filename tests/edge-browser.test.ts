/**
 * Code that runs inside the page is passed as strings: it is browser code, outside this project's types.
 *
 * The web page in a real browser (Debian's chromium through playwright-core) against a real HTTP server
 * on loopback: streaming, red cloud tokens, the metrics panel, Stop, compare, phone width, escaping.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { CloudClient, CloudSession, CloudStepRequest } from '../src/edge/cloud-client.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { ARTIFACTS_DIR, launchBrowser } from './helpers/browser.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

/** Wraps the in-process cloud with a per-step delay, so a generation lasts long enough to be stopped. */
function slowCloud(inner: CloudClient, delayMs: number, state: { open: number }): CloudClient {
  return {
    openSession(options) {
      const session: CloudSession = inner.openSession(options);
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

let edge: TestEdge;
let server: ReturnType<typeof Bun.serve>;
let browser: Browser;
let page: Page;
let base: string;
const cloudSessions = { open: 0 };

beforeAll(async () => {
  edge = await startTestEdge({ cloud: (inProcess) => slowCloud(inProcess, 15, cloudSessions), maxConcurrent: 4 });
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

async function generate(options: { mode: string; threshold?: string; maxNewTokens?: string; prompt?: string }) {
  await page.goto(base + '/');
  await page.fill('#prompt', options.prompt ?? 'Once upon a time');
  await page.check(`input[name=mode][value=${options.mode}]`);
  if (options.threshold) await page.locator('#threshold').fill(options.threshold);
  await page.fill('#maxNewTokens', options.maxNewTokens ?? '24');
  await page.click('button[type=submit]');
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
  expect(await page.locator('.output .tok-llm').first().getAttribute('title')).toMatch(/^cloud model · router score 0\.\d{3}$/);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-joint.png'), fullPage: true });
});

test('Stop mid-generation ends the stream and releases the server session', async () => {
  await generate({ mode: 'joint', threshold: '1', maxNewTokens: '400' });
  await page.waitForFunction("document.querySelectorAll('.output .tok').length >= 5");
  expect(edge.runtime.activeCount).toBe(1);
  await page.click('.run-head button');
  await page.waitForSelector('[data-finish=cancelled]');
  const shown = await page.locator('.output .tok').count();
  expect(shown).toBeLessThan(400);
  for (let i = 0; i < 50 && (edge.runtime.activeCount > 0 || cloudSessions.open > 0); i++) await Bun.sleep(20);
  expect(edge.runtime.activeCount).toBe(0);
  expect(cloudSessions.open).toBe(0);
  expect(edge.slm.stats.liveSequences).toBe(0);
  expect(await page.locator('.run-head button').isDisabled()).toBe(true);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-stopped.png'), fullPage: true });
});

test('compare view runs small_only and joint side by side', async () => {
  await page.goto(base + '/compare');
  await page.fill('#prompt', 'The little cat');
  await page.locator('#threshold').fill('0.8');
  await page.fill('#maxNewTokens', '16');
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
  await page.fill('#maxNewTokens', '0');
  // The browser's own check would block the form; an API client would not, so bypass it.
  await page.evaluate("document.querySelector('form').setAttribute('novalidate', '')");
  await page.click('button[type=submit]');
  await page.waitForSelector('#runs [role=alert]');
  expect(await page.locator('#runs [role=alert]').textContent()).toContain('max_new_tokens must be an integer in [1, 1024]');
});

test('usable at phone width and by keyboard', async () => {
  const phone = await browser.newPage({ viewport: { width: 375, height: 740 } });
  await phone.goto(base + '/');
  const scrollWidth = await phone.evaluate<number>('document.documentElement.scrollWidth');
  expect(scrollWidth).toBeLessThanOrEqual(375);
  await phone.focus('#prompt');
  await phone.keyboard.press('Tab');
  expect(await phone.evaluate<string>('document.activeElement.id')).toBe('threshold');
  await phone.keyboard.press('ArrowRight');
  expect(await phone.locator('#threshold-value').textContent()).toBe('0.51');
  await phone.screenshot({ path: join(ARTIFACTS_DIR, 'edge-page-phone.png'), fullPage: true });
  await phone.close();
});
