/**
 * `router train`'s report on held-out documents: printed, stored in router.json, shown in the page's about
 * box, and plain where the trained router does not beat the built-in top-1 router. The router trained here
 * is deliberately weak (one hidden unit, one epoch at a tiny step, 32 paragraphs): it cannot beat top-1.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { DEMO } from '../src/shared/paths.ts';
import { judged, type HeldOutReport } from '../src/tools/router/held-out-report.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { startTestEdge } from './helpers/edge-runtime.ts';

const work = mkdtempSync(join(tmpdir(), 'router-report-'));
const text = join(work, 'short.txt');
const weak = join(work, 'weak-router');
let run: { code: number | null; stdout: string; stderr: string };

afterAll(() => rmSync(work, { recursive: true, force: true }));

function router(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/router/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

beforeAll(async () => {
  await ensureDemoPacks();
  writeFileSync(
    text,
    readFileSync(DEMO.tinyStories, 'utf8')
      .split(/\n\s*\n/)
      .slice(0, 40)
      .join('\n\n'),
  );
  run = router(
    'train',
    '--edge-model',
    DEMO.edgePack,
    '--cloud-model',
    DEMO.cloudPack,
    '--text',
    text,
    '--out',
    weak,
    '--epochs',
    '1',
    '--hidden-units',
    '1',
    '--members',
    '1',
    '--learning-rate',
    '0.000001',
    '--rounds',
    '0',
    '--features',
    'hidden',
    '--labels',
    'citer',
    '--report-documents',
    '8',
    '--report-prompts',
    '3',
    '--report-loop-prompts',
    '5',
    '--report-tokens',
    '8',
    '--json',
  );
}, 180_000);

const SHARES = [0.1, 0.2, 0.3];

test('the report is printed after training: teacher-forced gap and free-running figures for the router and the three baselines', () => {
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('held-out report: 8 paragraphs, ');
  expect(run.stdout).toContain('teacher forcing, share of the edge→cloud gap recovered:');
  expect(run.stdout).toMatch(/ share +router +top-1 +entropy +random +oracle\n +10%/);
  expect(run.stdout).toContain(
    "free running (3 prompts, 8 tokens, sampled at temperature 1, one seed per prompt for every router), the cloud's perplexity of the output (rep4) [routed share reached]:",
  );
  expect(run.stdout).toMatch(
    /the loop check, greedy on 5 prompts: rep4 \[routed share\] .+ at its share \(2 streams pooled\); of the router's loop steps, those both models' top-1 would take:\n +10% +\d\.\d{3} \[\d+%\] +\d\.\d{3} \[\d+%\] +(none|\d+% of \d+)\n/,
  );
  expect(run.stdout).toMatch(/edge alone \d+\.\d\d \(\d\.\d{3}\); cloud alone \d+\.\d\d/);
  expect(run.stdout).toMatch(/distinct outputs, of 3:\n +10%( +[123]){4}\n/);
  expect(run.stderr).toMatch(/report: teacher forcing: 0\/8/);
});

test('router.json stores the report, and --json ends the output with it', () => {
  const meta = JSON.parse(readFileSync(join(weak, 'router.json'), 'utf8'));
  const report = meta.training.held_out_report as HeldOutReport;
  expect(report).toMatchObject({ noun: 'paragraph', documents: 8, free_running: { prompts: 3, max_new_tokens: 8, temperature: 1 } });
  expect(report.positions).toBeGreaterThan(100);
  expect(report.teacher_forced.map((r) => r.share)).toEqual(SHARES);
  for (const row of report.teacher_forced) {
    for (const method of ['router', 'top1', 'entropy', 'random', 'oracle'] as const) expect(Number.isFinite(row[method])).toBe(true);
    expect(row.oracle).toBeGreaterThanOrEqual(row.top1);
  }
  expect(report.free_running.at_share.map((r) => r.share)).toEqual(SHARES);
  for (const row of report.free_running.at_share) {
    for (const method of ['router', 'top1', 'entropy', 'random'] as const) {
      expect(row[method].ppl_cloud).toBeGreaterThan(1);
      expect(row[method].routed_share).toBeGreaterThanOrEqual(0);
      expect(row[method].rep4).toBeGreaterThanOrEqual(0);
      expect(row[method].distinct_outputs).toBeGreaterThanOrEqual(1);
      expect(row[method].distinct_outputs).toBeLessThanOrEqual(3);
    }
  }
  // The loop check: the router greedy on more prompts than the sampled runs (--report-loop-prompts), its
  // threshold searched for each share; random routing at the share that reached, two streams pooled.
  const loops = report.free_running.greedy_loop_check!;
  expect(loops.map((r) => r.share)).toEqual(SHARES);
  for (const row of loops) {
    expect(row.router.tau).toBeGreaterThan(0);
    expect(row.router.outputs).toBe(5);
    expect(row.random.outputs).toBe(10);
    // Why it loops: its loop steps are rep4's (none exactly where rep4 is 0), some of them both models'.
    expect(Number.isInteger(row.router.loop_steps)).toBe(true);
    expect(row.router.loop_steps! > 0).toBe(row.router.rep4 > 0);
    expect(row.router.shared_loop_steps).toBeGreaterThanOrEqual(0);
    expect(row.router.shared_loop_steps).toBeLessThanOrEqual(row.router.loop_steps!);
    expect(row.random.tau).toBe(row.router.routed_share);
    for (const r of [row.router, row.random]) expect(r.rep4).toBeGreaterThanOrEqual(0);
  }
  const last = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
  expect(last.training.held_out_report).toEqual(JSON.parse(JSON.stringify(report)));
  expect(last.seconds).toBeGreaterThan(0);
});

test('a router that does not beat top-1 says so plainly and names --router builtin', () => {
  const report = JSON.parse(readFileSync(join(weak, 'router.json'), 'utf8')).training.held_out_report as HeldOutReport;
  expect(report.beats_top1).toBe(false);
  expect(report.verdict).toMatch(
    /^The trained router does NOT beat the built-in top-1 router on 8 held-out paragraphs: .+\. Serve the built-in one with `--router builtin`/,
  );
  expect(run.stdout).toContain(report.verdict);
});

test('the verdict: beats top-1 only where it does at every share under both, and repetition against random is said apart', () => {
  const free = (ppl: number, rep4: number, distinct = 2) => ({
    tau: 0.5,
    routed_share: 0.2,
    ppl_cloud: ppl,
    ppl_cloud_fresh: ppl,
    rep4,
    stuck: 0,
    distinct_outputs: distinct,
  });
  const base: Pick<HeldOutReport, 'noun' | 'documents' | 'teacher_forced' | 'free_running'> = {
    noun: 'conversation',
    documents: 5,
    teacher_forced: [0.1, 0.3].map((share) => ({ share, router: 0.5, top1: 0.4, entropy: 0.3, random: 0.1, oracle: 0.9 })),
    free_running: {
      prompts: 2,
      max_new_tokens: 8,
      small_only: free(3, 0.2),
      llm_only: free(2, 0.1),
      at_share: [0.1, 0.3].map((share) => ({ share, router: free(2.5, 0.1), top1: free(2.6, 0.1), entropy: free(2.7, 0.1), random: free(2.8, 0.12) })),
    },
  };
  expect(judged(base)).toEqual({
    beats_top1: true,
    repeats_more_than_random_at: [],
    verdict:
      'The trained router beats the built-in top-1 router on 5 held-out conversations, under teacher forcing and free-running, at every share from 10% to 30%.',
  });
  const worse = {
    ...base,
    free_running: { ...base.free_running, at_share: [{ ...base.free_running.at_share[0]!, router: free(2.9, 0.2) }, base.free_running.at_share[1]!] },
  };
  expect(judged(worse)).toEqual({
    beats_top1: false,
    repeats_more_than_random_at: [0.1],
    verdict:
      "The trained router does NOT beat the built-in top-1 router on 5 held-out conversations: free-running at 10% the cloud's perplexity of its output is 2.90 against top-1's 2.60. " +
      'Serve the built-in one with `--router builtin` (bun run start / bun run edge), or train on more text. ' +
      "Its free-running output repeats itself more than random routing's (rep4) at 10% routed.",
  });
  // More routing alone lowers perplexity: top-1's runs at 30% instead of 20% are no comparison, and no win.
  const unmatched = {
    ...base,
    free_running: {
      ...base.free_running,
      at_share: [base.free_running.at_share[0]!, { ...base.free_running.at_share[1]!, top1: { ...free(2.6, 0.1), routed_share: 0.3 } }],
    },
  };
  // Four prompts, one text from the router at 30% (top-1's two are not under half): the verdict says what it rests on.
  const samey = {
    ...base,
    free_running: {
      ...base.free_running,
      prompts: 4,
      at_share: [base.free_running.at_share[0]!, { ...base.free_running.at_share[1]!, router: free(2.5, 0.1, 1) }],
    },
  };
  expect(judged(samey).beats_top1).toBe(true);
  expect(judged(samey).verdict).toEndWith(
    ' The free-running comparison rests on few texts: at 30% the router wrote 1 distinct output and top-1 2, from 4 prompts; other prompts or another seed can turn it.',
  );
  // A report written before outputs were counted has no distinct_outputs: no such sentence.
  const { distinct_outputs: _, ...uncounted } = free(2.5, 0.1, 1);
  expect(
    judged({ ...base, free_running: { ...base.free_running, at_share: [{ ...base.free_running.at_share[0]!, router: uncounted }] } }).verdict,
  ).not.toContain('few texts');
  // A sampled report reads loops from its greedy check: there the router repeats more at 30%, not at 10%.
  const loopRow = (share: number, router: number, random: number) => ({
    share,
    router: { tau: 0.5, routed_share: share, rep4: router, stuck: 0 },
    random: { tau: share, routed_share: share, rep4: random, stuck: 0 },
  });
  const checked = {
    ...worse,
    free_running: { ...worse.free_running, temperature: 1, greedy_loop_check: [loopRow(0.1, 0.05, 0.1), loopRow(0.3, 0.2, 0.1)] },
  };
  expect(judged(checked).repeats_more_than_random_at).toEqual([0.3]);
  expect(judged(checked).verdict).toEndWith(" Its greedy output repeats itself more than random routing's (rep4) at 30% routed.");
  expect(judged(unmatched).beats_top1).toBe(false);
  expect(judged(unmatched).verdict).toContain(
    "free-running at 30% the routed shares did not match (the router's runs 20%, top-1's 30%), so it is not shown to win there",
  );
});

test("the page's about box shows the router, its report and the verdict", async () => {
  const edge = await startTestEdge({ cloud: 'none', router: { pack: weak } });
  try {
    const html = await (await createEdgeApp(edge.runtime, { maxBodyBytes: 64 * 1024 }).request('/')).text();
    const box = html.slice(html.indexOf('<details class="router-about"'), html.indexOf('</details>', html.indexOf('router-about')));
    expect(box).toContain('<summary>About this router</summary>');
    expect(box).toContain('The trained router weak-router, default τ 0.5.');
    expect(box).toContain(
      '<p class="about-verdict about-loses" data-testid="router-verdict">The trained router does NOT beat the built-in top-1 router on 8 held-out paragraphs',
    );
    expect(box).toContain('Teacher forcing on 8 held-out paragraphs');
    expect(box).toContain('Free running from 3 held-out prompts (8 tokens, sampled at temperature 1)');
    expect(box).toMatch(/Loops, decoding greedily on 5 prompts \(rep4, trained against random at the same share\): 10%: \d\.\d{3} \/ \d\.\d{3} \[\d+%\]; 20%/);
    expect(box.match(/<th scope="row">(10|20|30)%<\/th>/g)).toHaveLength(6);
  } finally {
    await edge.release();
  }
});

test('--report-text naming a missing file fails before training, nothing written', () => {
  const out = join(work, 'never');
  const r = router(
    'train',
    '--edge-model',
    DEMO.edgePack,
    '--cloud-model',
    DEMO.cloudPack,
    '--text',
    text,
    '--out',
    out,
    '--report-text',
    join(work, 'absent.jsonl'),
  );
  expect(r.code).not.toBe(0);
  expect(r.stderr).toMatch(/absent\.jsonl: cannot read text file/);
  expect(existsSync(out)).toBe(false);
});
