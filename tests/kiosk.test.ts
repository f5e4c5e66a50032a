import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntilReady } from '../src/shared/process/wait-until-ready.ts';
import { KIOSK_FLAGS } from '../src/tools/kiosk.ts';

const work = mkdtempSync(join(tmpdir(), 'kiosk-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

test('waits for /readyz, then starts the browser in kiosk mode on the page', async () => {
  let ready = false;
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: (req) => new Response(null, { status: new URL(req.url).pathname === '/readyz' && ready ? 200 : 503 }),
  });
  // A stand-in browser that records its arguments: the launcher's contract is the command it runs.
  const browser = join(work, 'browser.sh');
  const record = join(work, 'args.txt');
  writeFileSync(browser, `#!/bin/sh\nprintf '%s\\n' "$@" > ${record}\n`);
  chmodSync(browser, 0o755);
  setTimeout(() => (ready = true), 600);
  const url = `http://127.0.0.1:${server.port}/`;
  const proc = Bun.spawn(['bun', 'src/tools/kiosk.ts', '--url', url, '--browser', browser, '--timeout-ms', '10000'], { stderr: 'pipe' });
  expect(await proc.exited).toBe(0);
  server.stop(true);
  expect(readFileSync(record, 'utf8').trim().split('\n')).toEqual([...KIOSK_FLAGS, url]);
});

test('gives up with a clear error when the edge never becomes ready', async () => {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(null, { status: 503 }) });
  await expect(waitUntilReady(`http://127.0.0.1:${server.port}/`, 300, 50)).rejects.toThrow(/readyz not ready after 300 ms \(HTTP 503\)/);
  server.stop(true);
});
