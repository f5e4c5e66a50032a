/**
 * `bun run eval --constrain-answer` as a process on a few CommonsenseQA questions, the cloud in process and
 * behind a real shim on a loopback port: every answer is one of the question's letters, exactly, and the
 * JSON's accuracy and routed share are what its per-question answers and token counts give.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { nestedRows, toJsonl } from './helpers/eval-commonsenseqa.ts';

const work = mkdtempSync(join(tmpdir(), 'eval-constrained-'));
const QUESTIONS = 5;
let shim: ShimServer;
let file: string;

beforeAll(async () => {
  await ensureDemoPacks();
  shim = await startTestShim();
  file = join(work, 'csqa.jsonl');
  writeFileSync(file, toJsonl(await nestedRows(QUESTIONS)));
}, 120_000);

afterAll(async () => {
  await shim?.shutdown();
  rmSync(work, { recursive: true, force: true });
});

async function evalCli(args: string[]) {
  const proc = Bun.spawn(['bun', 'src/tools/eval/cli.ts', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

interface Point {
  threshold: number;
  routed_ratio: number;
  quality: number;
  no_answer_rate: number;
  tokens: number;
  routed: number;
  cloud_tokens_replaced: number;
  constrained_fallbacks: number;
  answers: (string | null)[];
}

interface Report {
  answer_constraint: string;
  questions: number;
  answer_keys: string[];
  points: Point[];
  examples: { output: string; extracted: string }[];
}

async function constrainedRun(extra: string[]): Promise<Report> {
  const { stdout, stderr, code } = await evalCli([
    '--dataset',
    file,
    '--thresholds',
    '0,0.7,1',
    '--calibration-runs',
    '1',
    '--constrain-answer',
    '--json',
    ...extra,
  ]);
  expect(stderr).not.toContain('error');
  expect(code).toBe(0);
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
}

function expectConsistent(report: Report): void {
  expect(report.answer_constraint).toBe('choice');
  expect(report.questions).toBe(QUESTIONS);
  expect(report.answer_keys).toHaveLength(QUESTIONS);
  for (const point of report.points) {
    expect(point.answers).toHaveLength(QUESTIONS);
    for (const answer of point.answers) expect(['A', 'B', 'C', 'D', 'E']).toContain(answer!);
    const right = point.answers.filter((a, i) => a === report.answer_keys[i]).length;
    expect(point.quality).toBe(right / QUESTIONS);
    expect(point.no_answer_rate).toBe(0);
    expect(point.routed_ratio).toBe(point.tokens ? point.routed / point.tokens : 0);
    expect(point.routed).toBeLessThanOrEqual(point.tokens);
    // The letters' tokens, and nothing after them: the grammar ends each answer.
    expect(point.tokens).toBeLessThanOrEqual(2 * QUESTIONS);
  }
  // Nothing routed at τ = 0, everything at τ = 1; the counts are there either way.
  expect(report.points[0]!.routed).toBe(0);
  expect(report.points.at(-1)!.routed).toBe(report.points.at(-1)!.tokens);
  expect(report.points[0]!.cloud_tokens_replaced).toBe(0);
  expect(report.points.at(-1)!.cloud_tokens_replaced).toBeGreaterThanOrEqual(report.points.at(-1)!.constrained_fallbacks);
  // The plain prompt's answer line: the letter after its space, exactly.
  for (const example of report.examples) expect(example.output).toBe(` ${example.extracted}`);
}

describe('bun run eval --constrain-answer on CommonsenseQA', () => {
  test('in process and through a shim: exact letters, accuracy and routed share from the per-question records', async () => {
    const local = await constrainedRun([]);
    expectConsistent(local);
    const remote = await constrainedRun(['--cloud', shim.address]);
    expectConsistent(remote);
    // The same greedy decisions, whichever way the cloud is reached.
    expect(remote.points.map((p) => p.answers)).toEqual(local.points.map((p) => p.answers));
    expect(remote.points.map((p) => p.routed)).toEqual(local.points.map((p) => p.routed));
  }, 180_000);

  test('a data set that is not CommonsenseQA is refused with the reason', async () => {
    const { stderr, code } = await evalCli(['--dataset', DEMO.tinyStories, '--constrain-answer', '--limit', '1']);
    expect(code).toBe(1);
    expect(stderr).toContain('--constrain-answer applies to CommonsenseQA');
  });
});
