/**
 * The access token's details (issue 29, item 7), through the Hono app: the 401 page's login sets the
 * cookie and sends the browser on to the same address without `?token=`; /readyz without the token says
 * ready or not and nothing more; every 401, the OpenAI API's included, says `WWW-Authenticate: Bearer`.
 * The login is also done once in Debian's chromium, to see where the browser ends up.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Hono } from 'hono';
import type { Browser } from 'playwright-core';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { launchBrowser } from './helpers/browser.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

const TOKEN = 's3cret';
/** What Chromium sends when it navigates to a page (the 401 page's form submits with it). */
const BROWSER = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8' };

let edge: TestEdge;
let guarded: Hono;

beforeAll(async () => {
  edge = await startTestEdge({ maxConcurrent: 2 });
  guarded = createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024, accessToken: TOKEN, ready: () => true });
});
afterAll(async () => {
  await edge.release();
});

describe('logging in through the 401 page', () => {
  test('a right token sets the cookie and redirects to the same path and query without the token', async () => {
    const login = await guarded.request(`/compare?lang=en&token=${TOKEN}`, { headers: BROWSER });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/compare?lang=en');
    const cookie = login.headers.get('set-cookie')!;
    expect(cookie).toStartWith(`edge_token=${TOKEN};`);
    expect(cookie).toContain('HttpOnly');
    const after = await guarded.request('/compare?lang=en', { headers: { ...BROWSER, cookie: cookie.split(';')[0]! } });
    expect(after.status).toBe(200);
    expect(await after.text()).toContain('<!DOCTYPE html>');
    // The page's own path, the form's action: the address bar ends on `/`.
    expect((await guarded.request(`/?token=${TOKEN}`, { headers: BROWSER })).headers.get('location')).toBe('/');
  });

  test('a wrong token stays on the 401 page and sets nothing; a program asking for data is answered at once', async () => {
    const wrong = await guarded.request('/?token=nope', { headers: BROWSER });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(await wrong.text()).toContain('That token is wrong; try again.');
    const data = await guarded.request(`/api/info?token=${TOKEN}`, { headers: { accept: 'application/json' } });
    expect(data.status).toBe(200);
    expect(await data.json()).toMatchObject({ router: expect.any(String) });
  });
});

describe('redirects stay on the box (issue 45, item 5)', () => {
  test('a login link whose path names another host is sent to a path here, and its 401 form posts here too', async () => {
    for (const path of ['//evil.example/', '/\\evil.example/', '///evil.example/x', '/\\/evil.example/']) {
      const login = await guarded.request(`http://edge.local${path}?a=1&token=${TOKEN}`, { headers: BROWSER });
      expect(login.status).toBe(303);
      const location = login.headers.get('location')!;
      expect(location).toMatch(/^\/[^/\\]/);
      // Resolved as a browser resolves it against the page: still this box.
      expect(new URL(location, 'http://edge.local/').host).toBe('edge.local');
      const page = await guarded.request(`http://edge.local${path}`, { headers: BROWSER });
      expect(page.status).toBe(401);
      const action = (await page.text()).match(/action="([^"]*)"/)![1]!;
      expect(new URL(action, 'http://edge.local/').host).toBe('edge.local');
    }
  });
});

describe('in chromium', () => {
  let browser: Browser;
  let server: ReturnType<typeof Bun.serve>;
  beforeAll(async () => {
    server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: guarded.fetch });
    browser = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop(true);
  });

  test('the 401 page logs in and the address bar ends on the page asked for, without the token', async () => {
    const page = await browser.newPage();
    const base = `http://127.0.0.1:${server.port}`;
    await page.goto(`${base}/compare`);
    await page.fill('#token', TOKEN);
    const login = page.waitForResponse((r) => r.url().includes('token='));
    await page.click('button[type=submit]');
    expect((await login).status()).toBe(303);
    await page.waitForSelector('form[hx-post="/compare"]');
    expect(page.url()).toBe(`${base}/compare`);
    expect(await page.locator('#token').count()).toBe(0);
    // Reloading works from the cookie alone.
    expect((await page.reload())!.status()).toBe(200);
  }, 60_000);
});

describe('/readyz', () => {
  test('without the token: ready or not, nothing more; with it: the cloud state and the active count', async () => {
    const open = await guarded.request('/readyz');
    expect(open.status).toBe(200);
    expect(await open.json()).toEqual({ ready: true });
    expect(await (await guarded.request('/readyz', { headers: { authorization: 'Bearer wrong' } })).json()).toEqual({ ready: true });
    const withToken = await guarded.request('/readyz', { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(await withToken.json()).toEqual({ ready: true, cloud: edge.runtime.cloudState(), active: 0 });
    const notReady = createEdgeApp(edge.runtime, { maxBodyBytes: 1024, accessToken: TOKEN, ready: () => false });
    const refused = await notReady.request('/readyz');
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ ready: false });
  });
});

describe('WWW-Authenticate', () => {
  test('on every 401: page, fragment, API, metrics and the OpenAI API', async () => {
    const requests: [string, RequestInit][] = [
      ['/', { headers: BROWSER }],
      ['/fragments/cloud-state', { headers: { 'hx-request': 'true' } }],
      ['/api/info', {}],
      ['/api/generate', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }],
      ['/metrics', {}],
      ['/v1/models', {}],
      ['/v1/completions', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json', authorization: 'Bearer wrong' } }],
      ['/v1/chat/completions', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }],
    ];
    const seen = [];
    for (const [path, init] of requests) {
      const res = await guarded.request(path, init);
      seen.push({ path, status: res.status, challenge: res.headers.get('www-authenticate') });
    }
    expect(seen).toEqual(requests.map(([path]) => ({ path, status: 401, challenge: 'Bearer realm="edge"' })));
  });
});
