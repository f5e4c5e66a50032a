import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { DEFAULT_ROLLOUT_WEIGHT, TEXT_LOOP_COST_SHARE } from '../src/tools/router/train-router-options.ts';

const work = mkdtempSync(join(tmpdir(), 'router-cli-'));

/** A text file of the TinyStories excerpt's first `paragraphs` stories, in the test's folder. */
function firstStories(name: string, paragraphs: number): string {
  const path = join(work, name);
  writeFileSync(
    path,
    readFileSync(DEMO.tinyStories, 'utf8')
      .split(/\n\s*\n/)
      .slice(0, paragraphs)
      .join('\n\n'),
  );
  return path;
}
const out = join(work, 'router');
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** What `router train` prints as it works when stderr is not a terminal (lab/progress.ts's lineProgress). */
const PROGRESS_LINE = /^\[\d+ s\] [^:]+: \d+\/\d+/;

function router(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/router/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** A copy of the edge pack with one file rewritten. */
function patchedEdgePack(name: string, file: string, patch: (json: Record<string, unknown>) => void): string {
  const dir = join(work, name);
  cpSync(DEMO.edgePack, dir, { recursive: true });
  const json = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  patch(json);
  writeFileSync(join(dir, file), JSON.stringify(json));
  return dir;
}

// Building the demo packs (router training included) takes about half a minute on a fresh checkout.
beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

describe('router train with bad input: one-line error, nothing written', () => {
  const text = () => DEMO.tinyStories;
  const cases: [string, () => string[], RegExp][] = [
    [
      'missing edge pack',
      () => ['--edge-model', join(work, 'absent'), '--cloud-model', DEMO.cloudPack, '--text', text()],
      /absent: not a model pack \(no model\.onnx\)/,
    ],
    ['missing cloud pack', () => ['--edge-model', DEMO.edgePack, '--cloud-model', join(work, 'nowhere'), '--text', text()], /nowhere: not a model pack/],
    [
      'missing text file',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', join(work, 'absent.txt')],
      /absent\.txt: cannot read text file/,
    ],
    [
      'empty text file',
      () => {
        const f = join(work, 'empty.txt');
        writeFileSync(f, '\n  \n\n');
        return ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', f];
      },
      /empty\.txt: the text file is empty/,
    ],
    [
      'a single paragraph',
      () => {
        const f = join(work, 'one.txt');
        writeFileSync(f, 'Once upon a time there was a cat.');
        return ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', f];
      },
      /one\.txt: 1 paragraph\(s\); training needs at least 2/,
    ],
    [
      'packs with different tokenizers',
      () => {
        const other = patchedEdgePack('other-vocab', 'tokenizer.json', (json) => {
          const vocab = (json.model as { vocab: Record<string, number> }).vocab;
          const [a, b] = Object.keys(vocab).slice(100, 102) as [string, string];
          [vocab[a], vocab[b]] = [vocab[b]!, vocab[a]!];
        });
        return ['--edge-model', DEMO.edgePack, '--cloud-model', other, '--text', text()];
      },
      /have different tokenizers \(512 vs 512 embedding rows\)/,
    ],
    [
      'an edge pack whose hidden_states width differs from its hidden_size',
      () => {
        const wide = patchedEdgePack('wide', 'config.json', (json) => {
          json.hidden_size = 128;
        });
        return ['--edge-model', wide, '--cloud-model', DEMO.cloudPack, '--text', text()];
      },
      /hidden_states has 64 values per position, config\.json says hidden_size 128/,
    ],
    [
      'train fraction out of range',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--train-fraction', '1.5'],
      /--train-fraction must be in \(0, 1\), got 1\.5/,
    ],
    [
      'zero hidden units',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--hidden-units', '0'],
      /--hidden-units must be an integer in \[1, 65536\], got 0/,
    ],
    [
      'a horizon length with a rollout rule that reads none',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--rollout-labels', 'cloud-nll', '--horizon-tokens', '8'],
      /--horizon-tokens applies to --rollout-labels horizon-nll, horizon-loop-nll and horizon-loop-guard-nll only, got --rollout-labels cloud-nll/,
    ],
    [
      'a loop cost with a rollout rule that charges none',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--rollout-labels', 'horizon-loop-nll', '--loop-cost', '1'],
      /--loop-cost applies to --rollout-labels horizon-nll only, got --rollout-labels horizon-loop-nll/,
    ],
    [
      'a loop cost on text, whose default rollout rule charges none',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--loop-cost', '1'],
      /--loop-cost applies to --rollout-labels horizon-nll only, got --rollout-labels horizon-loop-guard-nll \(the default for this dataset; give --rollout-labels to choose another\)/,
    ],
    [
      'a rollout weight of 0',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--rollout-weight', '0'],
      /--rollout-weight must be in \(0, 1\], got 0/,
    ],
    [
      'a negative loop cost',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--loop-cost=-1'],
      /--loop-cost must be in \[0, 100\] nats, got -1/,
    ],
    [
      'a negative count of loop-check prompts',
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--report-loop-prompts=-1'],
      /--report-loop-prompts must be an integer in \[0, 100000\], got -1/,
    ],
    [
      "a report temperature above the API's 5",
      () => ['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text(), '--report-temperature', '7'],
      /--report-temperature must be in \[0, 5\], got 7/,
    ],
  ];
  for (const [name, args, message] of cases) {
    test(name, () => {
      const r = router('train', ...args(), '--out', out);
      // Progress lines (stderr is a pipe) may come first; the error is one line.
      expect(
        r.stderr
          .trim()
          .split('\n')
          .filter((l) => !PROGRESS_LINE.test(l)),
      ).toHaveLength(1);
      expect(r.stderr).toMatch(message);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(existsSync(out)).toBe(false);
      expect(readdirSync(work).filter((n) => n.includes('partial'))).toEqual([]);
    });
  }

  test('a missing flag is a usage error (exit 2)', () => {
    const r = router('train', '--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', DEMO.tinyStories);
    expect(r.code).toBe(2);
    expect(r.stderr).toStartWith('error: --out is required\n');
    expect(existsSync(out)).toBe(false);
  });

  test('--out may not be one of the model packs', () => {
    const r = router('train', '--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', DEMO.tinyStories, '--out', DEMO.edgePack);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/would replace the model pack/);
    expect(existsSync(join(DEMO.edgePack, 'model.onnx'))).toBe(true);
  });
});

test('router train: --labels, --rollout-labels, --features and --rounds are checked (usage errors, exit 2)', () => {
  const base = ['train', '--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', DEMO.tinyStories, '--out', out];
  const cases: [string[], RegExp][] = [
    [
      ['--labels', 'oracle'],
      /--labels must be one of divergence, citer, gain, cloud-gain, mixed-gain, cloud-nll, mixed-nll, loop-nll, loop-guard-nll, loop-averse-nll, loop-neutral-nll, got "oracle"/,
    ],
    [
      ['--rollout-labels', 'citer'],
      /--rollout-labels must be one of divergence, cloud-gain, cloud-nll, loop-nll, loop-guard-nll, loop-averse-nll, loop-neutral-nll, horizon-nll, horizon-loop-nll, horizon-loop-guard-nll, got "citer"/,
    ],
    [
      ['--features', 'logit_stats'],
      /--features must be a comma-separated list of hidden, previous_hidden, logit_stats, repetition, position, token, loop including hidden, got "logit_stats"/,
    ],
    [['--rounds', '11'], /--rounds must be in \[0, 10\], got 11/],
    [['--rollout-tokens', '0'], /--rollout-tokens must be in \[1, 4096\], got 0/],
  ];
  for (const [flags, message] of cases) {
    const r = router(...base, ...flags);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(existsSync(out)).toBe(false);
  }
});

test('router train --labels citer --rounds 0 is the first trainer: CITER labels, teacher forcing only', () => {
  const text = firstStories('citer.txt', 30);
  const dir = join(work, 'citer-router');
  const r = router(
    'train',
    '--edge-model',
    DEMO.edgePack,
    '--cloud-model',
    DEMO.cloudPack,
    '--text',
    text,
    '--out',
    dir,
    '--epochs',
    '2',
    '--hidden-units',
    '4',
    '--labels',
    'citer',
    '--rounds',
    '0',
    '--features',
    'hidden',
    '--report-documents',
    '0',
  );
  expect(r.code).toBe(0);
  const meta = JSON.parse(readFileSync(join(dir, 'router.json'), 'utf8'));
  expect(meta.features).toEqual(['hidden']);
  expect(meta.training.labels).toBe('citer-shortcut: 1 (keep) if the edge top-1 is correct or both are wrong; 0 (route) if only the cloud top-1 is correct');
  expect(meta.training.on_policy_labels).toBeNull();
  expect(meta.training.rounds).toHaveLength(1);
}, 30_000);

test('router train on a short text writes a loadable pack; router eval reads it back', () => {
  const text = firstStories('short.txt', 40);
  const small = join(work, 'small-router');
  const r = router(
    'train',
    '--edge-model',
    DEMO.edgePack,
    '--cloud-model',
    DEMO.cloudPack,
    '--text',
    text,
    '--out',
    small,
    '--epochs',
    '2',
    '--hidden-units',
    '8',
    '--seed',
    '3',
    '--rounds',
    '1',
    '--rollout-prompts',
    '4',
    '--rollout-tokens',
    '8',
    '--features',
    'hidden,repetition',
    '--report-documents',
    '0',
  );
  // No bar when stderr is not a terminal: plain progress lines, one as each phase starts.
  const lines = r.stderr.trim().split('\n');
  expect(lines.every((l) => PROGRESS_LINE.test(l))).toBe(true);
  expect(lines[0]).toMatch(/^\[\d+ s\] teacher forcing: 0\/\d+ \(0%\)$/);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/validation: AUC \d\.\d{4}/);
  expect(r.stdout).toMatch(/round 1: \d+ records; validation AUC \d\.\d{4} accuracy@0\.5 \d\.\d{4}, on-policy AUC .*; rollouts: 8 trajectories/);
  const meta = JSON.parse(readFileSync(join(small, 'router.json'), 'utf8'));
  expect(meta.features).toEqual(['hidden', 'repetition']);
  expect(meta.training).toMatchObject({
    seed: 3,
    hidden_units: 8,
    train_fraction: 0.8,
    max_epochs: 2,
    label_rule: 'mixed-gain',
    // Text's default rollout rule: the loops over both branches decide, no loop step is charged.
    on_policy_label_rule: 'horizon-loop-guard-nll',
    rollout_prompts: 4,
    rollout_tokens: 8,
    rollout_weight: DEFAULT_ROLLOUT_WEIGHT,
  });
  expect(meta.training.loop_cost).toBeUndefined();
  // A soft rule's default threshold is measured on the validation scores (softRuleThreshold), in thousandths.
  expect(meta.default_threshold).toBeGreaterThan(0);
  expect(meta.default_threshold).toBeLessThan(1);
  expect(Math.round(meta.default_threshold * 1000)).toBeCloseTo(meta.default_threshold * 1000, 9);
  expect(meta.training.paragraphs).toEqual({ train: 28, validation: 4, heldOut: 8 });
  expect(meta.training.rounds).toHaveLength(2);
  // 4 prompts × (greedy + sampled) × at most 8 tokens, one record per routing decision.
  expect(meta.training.rounds[1].rollout.trajectories).toBe(8);
  expect(meta.training.rounds[1].added).toBe(meta.training.rounds[1].rollout.tokens);
  expect(meta.training.rounds[1].added).toBeLessThanOrEqual(64);

  const e = router('eval', '--router', small, '--text', text, '--json');
  expect(e.code).toBe(0);
  const curve = JSON.parse(e.stdout.trim().split('\n').at(-1)!);
  expect(curve.points).toHaveLength(11);
  expect(curve.points[0].routedRatio).toBe(0);
  expect(curve.points[10].routedRatio).toBe(1);
}, 30_000);

test('router train --rollout-labels horizon-nll on text charges each loop step its default share of the median route gain', () => {
  const text = firstStories('short-horizon.txt', 40);
  const out = join(work, 'horizon-nll-router');
  const r = router(
    'train',
    ...['--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text, '--out', out, '--rollout-labels', 'horizon-nll'],
    // One small round, as fast as training goes.
    ...'--epochs 2 --hidden-units 8 --rounds 1 --rollout-prompts 4 --rollout-tokens 8 --features hidden --report-documents 0'.split(' '),
  );
  expect(r.code).toBe(0);
  const meta = JSON.parse(readFileSync(join(out, 'router.json'), 'utf8'));
  expect(meta.training).toMatchObject({ on_policy_label_rule: 'horizon-nll', loop_cost_share: TEXT_LOOP_COST_SHARE });
  // In nats: the share of a median gain the first round's rollouts measured, where the top-1s differed.
  expect(meta.training.loop_cost).toBeGreaterThan(0);
  expect(meta.training.loop_cost).toBeLessThan(TEXT_LOOP_COST_SHARE * 100);
}, 30_000);
