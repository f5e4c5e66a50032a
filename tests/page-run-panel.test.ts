/**
 * Code that runs inside the page is passed as strings: it is browser code, outside this project's types.
 *
 * What a new user sees after pressing Generate, in a real browser (Debian's chromium through playwright-core)
 * against a real HTTP server on loopback: on a phone the new run is scrolled into view (the form fills the
 * screen, so it would start below the fold), on a desktop that already shows it the page stays put; and the
 * metrics panel under a finished run leads with four plain figures and what was sent to the cloud, and folds
 * the text the cloud saw under "What the cloud saw" and the rest under "More details".
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { ARTIFACTS_DIR, launchBrowser } from './helpers/browser.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

const PHONE = { width: 390, height: 844 } as const;
const DESKTOP = { width: 1280, height: 800 } as const;

let edge: TestEdge;
let server: ReturnType<typeof Bun.serve>;
let browser: Browser;
let base: string;

beforeAll(async () => {
  edge = await startTestEdge();
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createEdgeApp(edge.runtime, { maxBodyBytes: 65536 }).fetch, idleTimeout: 0 });
  base = `http://127.0.0.1:${server.port}`;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
  await edge?.release();
});

/** A phone as playwright's device descriptors set one up: touch, mobile viewport, a 2x screen. */
function open(viewport: { width: number; height: number }): Promise<BrowserContext> {
  const phone = viewport.width < 500;
  return browser.newContext({ viewport, hasTouch: phone, isMobile: phone, deviceScaleFactor: phone ? 2 : 1 });
}

/** Where the first run's top and its head's bottom are, against the window's height, and how far the page is scrolled. */
interface InSight {
  top: number;
  headBottom: number;
  height: number;
  scrollY: number;
}
const insight = (tab: Page) =>
  tab.evaluate<InSight>(
    `(() => { const run = document.querySelector('#runs > .run'); const head = run.querySelector('.run-head');
      return { top: run.getBoundingClientRect().top, headBottom: head.getBoundingClientRect().bottom, height: innerHeight, scrollY }; })()`,
  );

/** Waits until the first run's head is inside the window and has stopped moving (the scroll is smooth). */
async function waitForRunInSight(tab: Page): Promise<InSight> {
  let last = Number.NaN;
  for (let i = 0; i < 100; i++) {
    const at = await insight(tab);
    if (at.top >= 0 && at.headBottom <= at.height && at.top === last) return at;
    last = at.top;
    await Bun.sleep(50);
  }
  return insight(tab);
}

async function submit(tab: Page, path: '/' | '/compare', mode?: string): Promise<number> {
  await tab.goto(base + path);
  await tab.fill('#prompt', 'Once upon a time');
  if (mode) await tab.check(`input[name=mode][value=${mode}]`);
  await tab.locator('#threshold').fill('0.9');
  await tab.fill('#max_new_tokens', '24');
  // Where the results will start, before there are any: on a phone, below the fold.
  const runsTop = await tab.evaluate<number>("document.getElementById('runs').getBoundingClientRect().top");
  await tab.click('button[type=submit]');
  await tab.waitForSelector('#runs > .run');
  return runsTop;
}

test('phone (390×844): after Generate the new run is scrolled into view; its metrics lead with four plain figures and what went to the cloud, and fold the rest', async () => {
  const context = await open(PHONE);
  try {
    const tab = await context.newPage();
    const runsTop = await submit(tab, '/', 'joint');
    expect(runsTop).toBeGreaterThan(PHONE.height);
    const at = await waitForRunInSight(tab);
    expect(at.top).toBeGreaterThanOrEqual(0);
    expect(at.headBottom).toBeLessThanOrEqual(PHONE.height);
    expect(at.scrollY).toBeGreaterThan(0);
    await tab.screenshot({ path: join(ARTIFACTS_DIR, 'page-phone-after-generate.png') });

    await tab.waitForSelector('[data-finish]');
    const summary = tab.locator('[data-testid=metrics-summary]');
    expect(await summary.locator('dt').allTextContents()).toEqual(['Tokens written', 'From the cloud', 'Speed', 'Cloud time', 'Sent to the cloud']);
    for (const row of await summary.locator('dt, dd').all()) expect(await row.isVisible()).toBe(true);
    const red = await tab.locator('.output .tok-llm').count();
    expect(red).toBeGreaterThan(0);
    const value = (key: string) => tab.locator(`[data-metric=${key}]`).textContent();
    expect(await value('tokens')).toBe('24');
    expect(await value('routed')).toBe(`${red} of 24 (${((red / 24) * 100).toFixed(1)}%)`);
    expect(await value('speed')).toMatch(/^\d+\.\d tokens\/s, the first after \d+\.\d ms$/);
    expect(await value('cloud-cost')).toMatch(new RegExp(`^\\d+\\.\\d ms for ${red} tokens?, \\d+\\.\\d ms each$`));
    expect(await value('cloud-sent')).toMatch(/^\d+ tokens \(\d+(\.\d)? k?B\), 0 placeholders, no hidden states, 0 positions kept home$/);
    // What the cloud saw, folded: with nothing marked private, the prompt as it was typed.
    const saw = tab.locator('details[data-testid=cloud-text]');
    expect(await saw.getAttribute('open')).toBeNull();
    expect(await saw.locator('summary').textContent()).toBe('What the cloud saw');
    expect(await saw.locator('pre').textContent()).toStartWith('Once upon a time');

    // The rest is there, in a fold that starts closed and opens on a tap.
    const more = tab.locator('details[data-testid=metrics-more]');
    expect(await more.getAttribute('open')).toBeNull();
    expect(await more.locator('summary').textContent()).toBe('More details');
    const details = ['policy', 'budget', 'fallback', 'cached', 'ttft', 'tbt', 'slm', 'batch', 'router', 'cloud', 'speculation', 'speculate', 'total'];
    expect(await tab.evaluate<string[]>("[...document.querySelectorAll('details[data-testid=metrics-more] dd')].map((d) => d.dataset.metric)")).toEqual(
      details,
    );
    expect(await more.locator('[data-metric=tbt]').isVisible()).toBe(false);
    await tab.locator('.run').screenshot({ path: join(ARTIFACTS_DIR, 'page-phone-run-summary.png') });
    await more.locator('summary').tap();
    expect(await more.getAttribute('open')).toBe('');
    for (const key of details) expect(await more.locator(`[data-metric=${key}]`).isVisible()).toBe(true);
    expect(await tab.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
    await tab.locator('.run').screenshot({ path: join(ARTIFACTS_DIR, 'page-phone-run-more-details.png') });
  } finally {
    await context.close();
  }
}, 30_000);

test('phone (390×844): after Compare the first of the two runs is scrolled into view', async () => {
  const context = await open(PHONE);
  try {
    const tab = await context.newPage();
    expect(await submit(tab, '/compare')).toBeGreaterThan(PHONE.height);
    const at = await waitForRunInSight(tab);
    expect(at.top).toBeGreaterThanOrEqual(0);
    expect(at.headBottom).toBeLessThanOrEqual(PHONE.height);
    await tab.waitForFunction("document.querySelectorAll('[data-finish]').length === 2");
  } finally {
    await context.close();
  }
}, 30_000);

test('desktop (1280×800): the new run already shows under the form, so the page does not move; a click opens the fold', async () => {
  const context = await open(DESKTOP);
  try {
    const tab = await context.newPage();
    expect(await submit(tab, '/', 'joint')).toBeLessThan(DESKTOP.height);
    await tab.waitForSelector('[data-finish]');
    const at = await insight(tab);
    expect(at.scrollY).toBe(0);
    expect(at.headBottom).toBeLessThanOrEqual(DESKTOP.height);
    expect(await tab.locator('[data-testid=metrics-summary] dd').count()).toBe(5);
    expect(await tab.locator('details[data-testid=metrics-more]').getAttribute('open')).toBeNull();
    await tab.screenshot({ path: join(ARTIFACTS_DIR, 'page-desktop.png'), fullPage: true });
    await tab.click('[data-testid=metrics-more] > summary');
    expect(await tab.locator('[data-metric=total]').isVisible()).toBe(true);
    await tab.locator('.run').screenshot({ path: join(ARTIFACTS_DIR, 'page-desktop-run-more-details.png') });
  } finally {
    await context.close();
  }
}, 30_000);
