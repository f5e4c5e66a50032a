/**
 * Static assets served from the installed packages and views/, never from a CDN. The names are the keys
 * of a Map, not of an object: an object lookup would also find `__proto__`, `constructor` or `toString`
 * on its prototype and hand a function to the file reader (a 500); anything not listed here is a 404.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Hono } from 'hono';
import { PROJECT_ROOT } from '../../shared/paths.ts';

const require = createRequire(import.meta.url);
const JS = 'text/javascript; charset=utf-8';

const FILES = new Map<string, { path: string; type: string }>([
  ['htmx.min.js', { path: require.resolve('htmx.org/dist/htmx.min.js'), type: JS }],
  ['sse.js', { path: require.resolve('htmx-ext-sse/sse.js'), type: JS }],
  ['app.css', { path: join(PROJECT_ROOT, 'views', 'app.css'), type: 'text/css; charset=utf-8' }],
  ['favicon.svg', { path: join(PROJECT_ROOT, 'views', 'favicon.svg'), type: 'image/svg+xml' }],
  ['token-details.js', { path: join(PROJECT_ROOT, 'views', 'token-details.js'), type: JS }],
  ['chat.js', { path: join(PROJECT_ROOT, 'views', 'chat.js'), type: JS }],
  ['private-marks.js', { path: join(PROJECT_ROOT, 'views', 'private-marks.js'), type: JS }],
  ['private-spans.js', { path: join(PROJECT_ROOT, 'views', 'private-spans.js'), type: JS }],
]);

export const assets = new Hono();

assets.get('/:name', async (c) => {
  const file = FILES.get(c.req.param('name'));
  if (!file) return c.text('not found', 404);
  return c.body(await Bun.file(file.path).arrayBuffer(), 200, {
    'content-type': file.type,
    'cache-control': 'public, max-age=3600',
  });
});
