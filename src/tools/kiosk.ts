/**
 * `bun run kiosk [--url URL] [--browser PATH] [--timeout-ms MS]`: waits until the edge answers /readyz,
 * then opens its page full screen in Chromium's kiosk mode (no address bar, no way out by mouse).
 * Run it from the kiosk user's graphical session (deploy/systemd/edge-router-kiosk.service).
 */
import { waitUntilReady } from '../shared/process/wait-until-ready.ts';
import { integerFlag, parseFlags, runCli } from './cli-support.ts';

const USAGE = 'usage: bun run kiosk [--url http://localhost:8080/] [--browser /usr/bin/chromium] [--timeout-ms 120000]';

export const KIOSK_FLAGS = [
  '--kiosk',
  '--noerrdialogs',
  '--disable-infobars',
  '--no-first-run',
  '--disable-session-crashed-bubble',
  '--disable-background-networking',
  '--disable-component-update',
  '--overscroll-history-navigation=0',
];

async function main(): Promise<void> {
  const { values } = parseFlags(process.argv.slice(2), {
    url: { type: 'string', default: 'http://localhost:8080/' },
    browser: { type: 'string', default: '/usr/bin/chromium' },
    'timeout-ms': { type: 'string' },
  });
  const url = values.url!;
  await waitUntilReady(url, integerFlag(values, 'timeout-ms', 120_000)!);
  const browser = Bun.spawn([values.browser!, ...KIOSK_FLAGS, url], { stdout: 'inherit', stderr: 'inherit' });
  // A kiosk follows its browser: when it exits, so do we (systemd restarts the unit).
  process.exit(await browser.exited);
}

if (import.meta.main) await runCli(main, USAGE);
