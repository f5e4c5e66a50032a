/** Static assets served from the installed packages and views/, never from a CDN. */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Hono } from 'hono';
import { PROJECT_ROOT } from '../../shared/paths.ts';

const require = createRequire(import.meta.url);

const FILES: Record<string, { path: string; type: string }> = {
  'htmx.min.js': { path: require.resolve('htmx.org/dist/htmx.min.js'), type: 'text/javascript; charset=utf-8' },
  'sse.js': { path: require.resolve('htmx-ext-sse/sse.js'), type: 'text/javascript; charset=utf-8' },
  'app.css': { path: join(PROJECT_ROOT, 'views', 'app.css'), type: 'text/css; charset=utf-8' },
};

export const assets = new Hono();

assets.get('/:name', async (c) => {
  const file = FILES[c.req.param('name')];
  if (!file) return c.text('not found', 404);
  return c.body(await Bun.file(file.path).arrayBuffer(), 200, {
    'content-type': file.type,
    'cache-control': 'public, max-age=3600',
  });
});
