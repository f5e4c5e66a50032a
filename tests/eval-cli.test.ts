import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { flatten, nestedRows, toJsonl } from './helpers/eval-commonsenseqa.ts';

const work = mkdtempSync(join(tmpdir(), 'eval-cli-'));

beforeAll(async () => {
  await ensureDemoPacks();
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

async function evalCli(args: string[]) {
  const proc = Bun.spawn(['bun', 'src/tools/eval/cli.ts', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

describe('bun run eval', () => {
  test('text: Markdown tables, the JSON object on the last line, and the plots', async () => {
    const out = join(work, 'plots');
    const { stdout, stderr, code } = await evalCli([
      '--dataset', DEMO.tinyStories, '--limit', '3', '--continuations', '2', '--max-new-tokens', '8',
      '--thresholds', '1,0,0.5', '--out', out, '--name', 'stories', '--json',
    ]);
    expect(stderr).not.toContain('error');
    expect(code).toBe(0);
    expect(stdout).toContain('paragraphs 985–987 of 1230 (after the first 80%)');
    expect(stdout).toContain('| τ | routed | router | random | random (expected) | top-1 prob. | top-1 τ |');
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(json.format).toBe('text');
    expect(json.quality_metric).toBe('next_token_accuracy');
    expect(json.points.map((p: { threshold: number }) => p.threshold)).toEqual([0, 0.5, 1]);
    expect(json.points[0].routed_ratio).toBe(0);
    expect(json.points[2].routed_ratio).toBe(1);
    expect(Object.keys(json.points[1]).sort()).toEqual(['cloud_perplexity', 'generated_routed_ratio', 'quality', 'routed_ratio', 'threshold']);
    expect(json.baselines.random).toHaveLength(3);
    expect(json.baselines.top1[1].routed_ratio).toBe(json.points[1].routed_ratio);
    expect(readdirSync(out).sort()).toEqual(['stories-perplexity.svg', 'stories-quality-vs-routed.svg', 'stories-quality.svg', 'stories-routed.svg']);
    const svg = readFileSync(join(out, 'stories-quality.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('trained router');
  });

  test('CommonsenseQA in the flattened layout, with the built-in router', async () => {
    const file = join(work, 'flat.jsonl');
    writeFileSync(file, toJsonl((await nestedRows(2)).map(flatten)));
    const { stdout, code } = await evalCli(['--dataset', file, '--router', 'builtin', '--thresholds', '0,1', '--max-new-tokens', '4', '--json']);
    expect(code).toBe(0);
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(json.format).toBe('commonsenseqa-flat');
    expect(json.router).toBe('builtin:top1-probability');
    expect(json.questions).toBe(2);
    expect(json.chance_accuracy).toBeCloseTo(0.2, 12);
    expect(json.points.map((p: { routed_ratio: number }) => p.routed_ratio)).toEqual([0, 1]);
    expect(Object.keys(json.points[0]).sort()).toEqual(['no_answer_rate', 'quality', 'routed_ratio', 'threshold', 'tokens']);
  });

  test('bad flags are usage errors (exit 2)', async () => {
    const missing = await evalCli([]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--dataset is required');
    const bad = await evalCli(['--dataset', DEMO.tinyStories, '--thresholds', '0,2']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--thresholds must be comma-separated numbers in [0, 1]');
    const absent = await evalCli(['--dataset', join(work, 'nope.txt')]);
    expect(absent.code).toBe(1);
    expect(absent.stderr).toContain('nope.txt: cannot read');
  });
});
