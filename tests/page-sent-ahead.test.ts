/**
 * Code that runs inside the page is passed as strings: it is browser code, outside this project's types.
 *
 * "Sent to the cloud" with decoding ahead (issue 54, item 7e): a step can go to the cloud on the edge's guess
 * while the cloud answers the one before, so the same answer costs different counts from run to run. The row
 * says how many steps went on a guess and how many of those guesses were wrong, with a line saying why the
 * counts vary. The figures come from real generations (the in-process cloud, each step held 30 ms, so routed
 * positions close together go out while the one before is in flight) and reach the page through its stream,
 * in a real browser; the words for given figures are checked exactly on the rendered panel.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { CloudDisclosure } from '../src/edge/cloud/cloud-disclosure.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { MetricsRecorder } from '../src/edge/loop/generation-metrics.ts';
import { thresholdReport } from '../src/edge/routing/routing-budget-report.ts';
import { MetricsPanel } from '../views/run-fragments.tsx';
import { ARTIFACTS_DIR, launchBrowser } from './helpers/browser.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';
import { late } from './helpers/scripted-clouds.ts';

let edge: TestEdge;
let server: ReturnType<typeof Bun.serve>;
let browser: Browser;
let base: string;

beforeAll(async () => {
  edge = await startTestEdge({ cloud: (inProcess) => late(inProcess, 30), speculateByDefault: true });
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createEdgeApp(edge.runtime, { maxBodyBytes: 65536 }).fetch, idleTimeout: 0 });
  base = `http://127.0.0.1:${server.port}`;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
  await edge?.release();
});

/** A run's "Sent to the cloud" as the page shows it. */
interface SentRow {
  text: string;
  aheadSteps: number;
  aheadWrong: number;
  streams: number;
  tokens: number;
  why: string | null;
  whyVisible: boolean;
}

test('a run that sent steps ahead on a guess says how many, how many guesses were wrong, and why the counts vary', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const tab = await context.newPage();
    const prompts = ['Once upon a time, there was a little dog', 'Lily went to the park', 'Tom had a big red ball. One day', 'The sun was hot and the bird'];
    const rows: SentRow[] = [];
    for (const prompt of prompts) {
      await tab.goto(base);
      await tab.fill('#prompt', prompt);
      await tab.check('input[name=mode][value=joint]');
      await tab.selectOption('#speculate', 'on');
      await tab.locator('#threshold').fill('0.9');
      await tab.fill('#max_new_tokens', '24');
      await tab.click('button[type=submit]');
      await tab.waitForSelector('[data-finish]', { timeout: 30_000 });
      await tab.waitForSelector('[data-metric=cloud-sent]');
      const row = await tab.evaluate<SentRow>(`(() => {
        const dd = document.querySelector('[data-metric=cloud-sent]');
        const why = dd.querySelector('[data-testid=cloud-sent-varies]');
        return { text: dd.firstChild.textContent, aheadSteps: Number(dd.dataset.aheadSteps), aheadWrong: Number(dd.dataset.aheadWrong),
          streams: Number(dd.dataset.streams), tokens: Number(dd.dataset.tokens), why: why && why.textContent, whyVisible: !!why && why.getBoundingClientRect().height > 0 };
      })()`);
      rows.push(row);
      if (row.aheadSteps > 0) break;
    }
    const guessed = rows.find((r) => r.aheadSteps > 0);
    expect(guessed).toBeDefined();
    const { aheadSteps, aheadWrong, streams, tokens } = guessed!;
    expect(aheadWrong).toBeLessThanOrEqual(aheadSteps);
    expect(guessed!.text).toStartWith(`${tokens} tokens (`);
    expect(guessed!.text).toContain(`, ${aheadSteps} ${aheadSteps === 1 ? 'step' : 'steps'} sent ahead on a guess (${aheadWrong} wrong)`);
    expect(guessed!.text.endsWith(streams > 1 ? `, ${streams} streams opened` : 'wrong)')).toBe(true);
    expect(guessed!.why).toStartWith(
      "These counts depend on timing as well as on the text: decoding ahead sent steps on the edge's guess while the cloud answered the one before",
    );
    expect(guessed!.whyVisible).toBe(true);
    await tab
      .locator('.run')
      .first()
      .screenshot({ path: join(ARTIFACTS_DIR, 'page-sent-ahead.png') });
  } finally {
    await context.close();
  }
}, 120_000);

test('the words for given figures: nothing extra without guesses or reopened streams', async () => {
  const disclosure = new CloudDisclosure();
  disclosure.sent([{ open: { contextIds: [1, 2, 3] } }, { step: { offset: 3, ids: [4] } }]);
  const recorder = new MetricsRecorder(3);
  recorder.token('llm');
  const plain = { ...recorder.finish(thresholdReport(0.5), disclosure.report()), totalMs: 10, ttftMs: 5 };
  const render = async (m: typeof plain) => String(await MetricsPanel({ metrics: m, mode: 'joint', cloudText: 'x' }).toString());
  const plainHtml = await render(plain);
  expect(plainHtml).toContain('data-ahead-steps="0" data-ahead-wrong="0" data-streams="1">4 tokens (');
  expect(plainHtml).not.toContain('sent-varies');
  const guessed = await render({ ...plain, conditionalSteps: 3, conditionalSkipped: 1, cloud: { ...plain.cloud, streams: 2 } });
  expect(guessed).toContain('0 positions kept home, 3 steps sent ahead on a guess (1 wrong), 2 streams opened<span class="legend sent-varies"');
  expect(guessed).toContain(
    'These counts depend on timing as well as on the text: decoding ahead sent steps on the edge&#39;s guess while the cloud answered the one before, a wrong guess&#39;s for nothing; each stream opened again sent the whole context again. The same answer can cost more or less on another run.',
  );
});
