/** Debian's chromium driven by playwright-core, with the flags this closed network needs. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { PROJECT_ROOT } from '../../src/shared/paths.ts';

export const CHROMIUM = '/usr/bin/chromium';
/** Screenshots and other test artifacts (git-ignored). */
export const ARTIFACTS_DIR = join(PROJECT_ROOT, 'artifacts');

export async function launchBrowser(): Promise<Browser> {
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
