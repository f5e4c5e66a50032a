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
    const dump = join(work, 'positions.jsonl');
    const { stdout, stderr, code } = await evalCli([
      '--dataset',
      DEMO.tinyStories,
      '--limit',
      '3',
      '--continuations',
      '2',
      '--max-new-tokens',
      '8',
      '--thresholds',
      '1,0,0.5',
      '--shares',
      '0.3',
      '--calibration-runs',
      '2',
      '--out',
      out,
      '--name',
      'stories',
      '--dump',
      dump,
      '--json',
    ]);
    expect(stderr).not.toContain('error');
    expect(code).toBe(0);
    // The TinyStories excerpt is the demo router's training text (router.json has its sha256): its last 20% are read.
    expect(stderr).toContain("1230 documents, split blank-line (auto-detected); the router's training text: the documents after the first 80%");
    expect(stdout).toContain("documents 985–987 of 1230 (split blank-line (auto-detected); the router's training text: the documents after the first 80%)");
    expect(stdout).toContain('| τ | routed | router | random | random (expected) | top-1 prob. | top-1 τ |');
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(json.format).toBe('text');
    expect(json.quality_metric).toBe('next_token_accuracy');
    expect(json.points.map((p: { threshold: number }) => p.threshold)).toEqual([0, 0.5, 1]);
    expect(json.points[0].routed_ratio).toBe(0);
    expect(json.points[2].routed_ratio).toBe(1);
    expect(Object.keys(json.points[1]).sort()).toEqual(['cloud_perplexity', 'generated_routed_ratio', 'quality', 'rep4', 'routed_ratio', 'stuck', 'threshold']);
    const [row] = json.teacher_forcing.at_share;
    expect(Object.keys(row).sort()).toEqual(['entropy', 'large_only_accuracy', 'oracle', 'random', 'routed', 'router', 'share', 'small_only_accuracy', 'top1']);
    expect(row.share).toBe(0.3);
    expect(row.small_only_accuracy).toBe(json.small_only_accuracy);
    // The share budget at its default 0.1, per document and as one stream, and route spans at that share.
    expect(stdout).toContain('| budget | scope | realized | full windows |');
    const budgets = json.teacher_forcing.share_budget;
    expect(budgets.map((b: { share: number; scope: string }) => `${b.scope}@${b.share}`)).toEqual(['document@0.1', 'stream@0.1']);
    expect(Object.keys(budgets[0]).sort()).toEqual([
      'budget_recovered',
      'early_window_max',
      'early_window_min',
      'early_windows',
      'full_window_max',
      'full_window_min',
      'full_windows',
      'guarded',
      'realized_share',
      'routed',
      'scope',
      'share',
      'tau',
      'tau_recovered',
      'tau_share',
    ]);
    for (const b of budgets) expect(Math.abs(b.tau_share - b.realized_share) * json.positions).toBeLessThanOrEqual(1);
    expect(json.teacher_forcing.spans.map((r: { span: number }) => r.span)).toEqual([1, 2, 4]);
    expect(json.generation.settings.map((g: { method: string; target_share: number | null }) => `${g.method}@${g.target_share}`)).toEqual([
      'small_only@null',
      'llm_only@null',
      'router@0.3',
      'random@0.3',
      'top1@0.3',
      'entropy@0.3',
    ]);
    const [edgeOnly, cloudOnly] = json.generation.settings;
    expect(edgeOnly.routed_share).toBe(0);
    expect(cloudOnly.routed_share).toBe(1);
    expect(cloudOnly.lcp_llm_only).toBe(8); // 8 new tokens, identical to itself
    for (const g of json.generation.settings) {
      expect(g.outputs).toBe(2);
      expect(g.examples).toHaveLength(2);
      expect(g.stuck).toBeLessThanOrEqual(2);
    }
    const lines = readFileSync(dump, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(json.positions);
    expect(Object.keys(lines[0]).sort()).toEqual(['entropy', 'llm_correct', 'next_id', 'paragraph', 'route_label', 'router_score', 'slm_correct', 'top1']);
    expect(lines.reduce((s: number, l: { slm_correct: number }) => s + l.slm_correct, 0) / lines.length).toBeCloseTo(json.small_only_accuracy, 12);
    expect(json.baselines.random).toHaveLength(3);
    expect(json.baselines.top1[1].routed_ratio).toBe(json.points[1].routed_ratio);
    expect(readdirSync(out).sort()).toEqual([
      'stories-perplexity-at-share.svg',
      'stories-perplexity.svg',
      'stories-quality-vs-routed.svg',
      'stories-quality.svg',
      'stories-recovered-at-share.svg',
      'stories-routed.svg',
      'stories-stuck-at-share.svg',
    ]);
    expect(readFileSync(join(out, 'stories-stuck-at-share.svg'), 'utf8')).toContain('edge entropy');
    const svg = readFileSync(join(out, 'stories-quality.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('trained router');
  });

  test('a text that is not the training text is held out whole, in windows when long; --from-fraction is refused for it', async () => {
    // One story per line, and one line far longer than the 512-token window.
    const stories = readFileSync(DEMO.tinyStories, 'utf8')
      .split(/\n\s*\n/)
      .slice(1000, 1003)
      .map((p) => p.replace(/\s+/g, ' '));
    const file = join(work, 'stories-per-line.txt');
    writeFileSync(file, `${stories[0]}\n${stories[1]}\n${Array.from({ length: 30 }, () => stories[2]).join(' ')}\n`);
    const { stdout, stderr, code } = await evalCli([
      '--dataset',
      file,
      '--continuations',
      '1',
      '--max-new-tokens',
      '4',
      '--thresholds',
      '0.5',
      '--shares',
      'none',
      '--json',
    ]);
    expect(code).toBe(0);
    expect(stderr).toContain("3 documents, split line (auto-detected); not the router's training text: held out as a whole");
    expect(stderr).toContain('1 of 3 paragraphs are longer than the context window (512 tokens): scored in consecutive windows, every token once');
    const json = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(json.paragraphs).toBe(3);
    expect(json.windowed_paragraphs).toBe(1);
    expect(json.teacher_forcing.at_share).toEqual([]);
    expect(json.generation.settings).toEqual([]);
    const refused = await evalCli(['--dataset', file, '--from-fraction', '0.5']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("--from-fraction applies only to the router's training text");
    const split = await evalCli(['--dataset', file, '--split', 'words']);
    expect(split.code).toBe(2);
    expect(split.stderr).toContain('--split must be one of auto, endoftext, blank-line, line, got "words"');
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
    expect(Object.keys(json.points[0]).sort()).toEqual(['answers', 'no_answer_rate', 'quality', 'routed', 'routed_ratio', 'threshold', 'tokens']);
  });

  test('bad flags are usage errors (exit 2)', async () => {
    const missing = await evalCli([]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--dataset is required');
    const bad = await evalCli(['--dataset', DEMO.tinyStories, '--thresholds', '0,2']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--thresholds must be comma-separated numbers in [0, 1]');
    const share = await evalCli(['--dataset', DEMO.tinyStories, '--route-share', '0.1,1.5']);
    expect(share.code).toBe(2);
    expect(share.stderr).toContain('--route-share must be comma-separated numbers in (0, 1), or none, got "0.1,1.5"');
    const absent = await evalCli(['--dataset', join(work, 'nope.txt')]);
    expect(absent.code).toBe(1);
    expect(absent.stderr).toContain('nope.txt: cannot read');
  });
});
