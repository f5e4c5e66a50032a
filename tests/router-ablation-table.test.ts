/**
 * The ablation table in docs/router-training.md is what the recorded `router train` runs render
 * (scripts/router-ablation-table.ts), and the renderer reads a run's pair and variant from its command.
 */
import { expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ABLATION_PAGE,
  ablationMarkdown,
  onPolicyGainMarkdown,
  pageWithAblation,
  pairOf,
  reportOf,
  standingMarkdown,
  variantOf,
} from '../scripts/router-ablation-table.ts';
import { DEFAULT_REPORT } from '../src/tools/router/held-out-report.ts';
import { Fields } from '../scripts/results/data-file.ts';
import { FEATURE_GROUPS } from '../src/edge/routing/router-features.ts';
import { HORIZON_TOKENS } from '../src/tools/router/horizon-gain.ts';
import { DEFAULT_ROLLOUT_WEIGHT, TEXT_LOOP_COST_SHARE } from '../src/tools/router/train-router-options.ts';

test('docs/router-training.md shows the table the recorded runs render (bun scripts/router-ablation-table.ts --write)', () => {
  const page = readFileSync(ABLATION_PAGE, 'utf8');
  expect(pageWithAblation(page, ablationMarkdown(), onPolicyGainMarkdown(), standingMarkdown())).toBe(page);
});

test("a run's pair comes from its saved command, its variant from its router.json", () => {
  const command = 'bun run router train --edge-model models/stories260k-3l --cloud-model models/stories260k --text x.txt --out /tmp/r --json';
  expect(pairOf(command)).toBe('stories260k-3l → stories260k');
  const meta = (features: string[], rounds: number, members: number) =>
    new Fields('x', {
      features,
      training: {
        label_rule: 'mixed-gain',
        on_policy_label_rule: 'cloud-nll',
        rounds: Array.from({ length: rounds + 1 }, () => ({})),
        members,
        rollout_weight: DEFAULT_ROLLOUT_WEIGHT,
      },
    });
  expect(variantOf(meta([...FEATURE_GROUPS], 3, 3))).toBe('text: mixed-gain; rollouts: cloud-nll');
  // Recorded before --rollout-weight: the rollouts weighed 1; without rounds there were none to weigh.
  const unweighted = (rounds: number) =>
    new Fields('x', {
      features: [...FEATURE_GROUPS],
      training: { label_rule: 'mixed-gain', on_policy_label_rule: 'cloud-nll', rounds: Array.from({ length: rounds + 1 }, () => ({})), members: 3 },
    });
  expect(variantOf(unweighted(3))).toBe('text: mixed-gain; rollouts: cloud-nll; rollout weight 1');
  expect(variantOf(unweighted(0))).toBe('text: mixed-gain; rollouts: cloud-nll; 0 rounds');
  /** A horizon-nll run's router.json: three rounds, three members, and what `training` adds. */
  const horizonRun = (training: Record<string, unknown>, features: string[] = [...FEATURE_GROUPS]) =>
    new Fields('x', {
      features,
      training: {
        label_rule: 'mixed-gain',
        on_policy_label_rule: 'horizon-nll',
        rounds: [{}, {}, {}, {}],
        members: 3,
        rollout_weight: DEFAULT_ROLLOUT_WEIGHT,
        ...training,
      },
    });
  const horizon = (loopCost: number | undefined, horizonTokens: number, share?: number) =>
    horizonRun({
      horizon_tokens: horizonTokens,
      ...(loopCost === undefined ? {} : { loop_cost: loopCost }),
      ...(share === undefined ? {} : { loop_cost_share: share }),
    });
  // The default: whatever the nats, worked out from text's share of the median gain.
  expect(variantOf(horizon(0.37, HORIZON_TOKENS, TEXT_LOOP_COST_SHARE))).toBe('text: mixed-gain; rollouts: horizon-nll');
  expect(variantOf(horizon(0.5, HORIZON_TOKENS, 0.3))).toBe('text: mixed-gain; rollouts: horizon-nll; loop cost 0.3 of the median gain');
  // A cost given in nats (--loop-cost) is a variant, whatever its value.
  expect(variantOf(horizon(0.25, HORIZON_TOKENS))).toBe('text: mixed-gain; rollouts: horizon-nll; loop cost 0.25');
  const seeded = horizonRun({ loop_cost: 0.4, loop_cost_share: TEXT_LOOP_COST_SHARE, seed: 1 });
  expect(variantOf(seeded)).toBe('text: mixed-gain; rollouts: horizon-nll; seed 1');
  // Recorded before --loop-cost: no loop step was charged.
  expect(variantOf(horizon(undefined, HORIZON_TOKENS))).toBe('text: mixed-gain; rollouts: horizon-nll; loop cost 0');
  // A chat dataset's defaults leave the loop group out: a chat router without it is no variant.
  const chat = (features: string[]) =>
    new Fields('x', {
      features,
      training: {
        label_rule: 'mixed-gain',
        on_policy_label_rule: 'cloud-nll',
        rounds: [{}, {}, {}, {}],
        members: 3,
        rollout_weight: DEFAULT_ROLLOUT_WEIGHT,
        text_format: 'chat',
      },
    });
  expect(variantOf(chat(FEATURE_GROUPS.filter((g) => g !== 'loop')))).toBe('text: mixed-gain; rollouts: cloud-nll');
  expect(variantOf(chat(['hidden', 'previous_hidden', 'logit_stats', 'repetition', 'position']))).toBe('text: mixed-gain; rollouts: cloud-nll; without token');
  expect(variantOf(chat([...FEATURE_GROUPS]))).toBe('text: mixed-gain; rollouts: cloud-nll; with loop');
  // Nor is a chat router that charges loop steps nothing; one that charges text's cost is.
  const chatHorizon = (loopCost: number, share?: number) =>
    horizonRun(
      { text_format: 'chat', loop_cost: loopCost, ...(share === undefined ? {} : { loop_cost_share: share }) },
      FEATURE_GROUPS.filter((g) => g !== 'loop'),
    );
  expect(variantOf(chatHorizon(0))).toBe('text: mixed-gain; rollouts: horizon-nll');
  expect(variantOf(chatHorizon(0, 0))).toBe('text: mixed-gain; rollouts: horizon-nll');
  expect(variantOf(chatHorizon(0.25))).toBe('text: mixed-gain; rollouts: horizon-nll; loop cost 0.25');
  expect(variantOf(chatHorizon(0.4, TEXT_LOOP_COST_SHARE))).toBe(
    `text: mixed-gain; rollouts: horizon-nll; loop cost ${TEXT_LOOP_COST_SHARE} of the median gain`,
  );
  expect(
    variantOf(
      meta(
        FEATURE_GROUPS.filter((g) => g !== 'loop'),
        3,
        3,
      ),
    ),
  ).toBe('text: mixed-gain; rollouts: cloud-nll; without loop');
  expect(variantOf(horizon(0.75, 8))).toBe('text: mixed-gain; rollouts: horizon-nll; horizon 8 tokens; loop cost 0.75');
  expect(variantOf(meta(['hidden', 'logit_stats'], 0, 1))).toBe(
    'text: mixed-gain; rollouts: cloud-nll; without previous_hidden, repetition, position, token, loop; 0 rounds; 1 member',
  );
});

test("a run's report is named where it generated otherwise than today's default: greedy, or from another number of prompts", () => {
  const free = (fields: Record<string, unknown>) => new Fields('run.jsonl', fields, 'free_running');
  expect(reportOf(free({ prompts: DEFAULT_REPORT.prompts, temperature: DEFAULT_REPORT.temperature }))).toBe('');
  expect(reportOf(free({ prompts: 64, temperature: DEFAULT_REPORT.temperature }))).toBe('; report on 64 prompts');
  // Reports written before sampling have no temperature: they were greedy.
  expect(reportOf(free({ prompts: 32 }))).toBe('; greedy report on 32 prompts');
  expect(reportOf(free({ prompts: DEFAULT_REPORT.prompts, temperature: 0 }))).toBe('; greedy report');
  expect(reportOf(free({ prompts: DEFAULT_REPORT.prompts, temperature: 0.7 }))).toBe('; temperature 0.7 report');
  // A loop check that does not count its outputs read the sampled runs' prompts with one random stream.
  const loopRow = (outputs?: number) => ({ share: 0.1, router: { rep4: 0.1, ...(outputs ? { outputs } : {}) }, random: { rep4: 0.1 } });
  const sampled = { prompts: DEFAULT_REPORT.prompts, temperature: DEFAULT_REPORT.temperature };
  expect(reportOf(free({ ...sampled, greedy_loop_check: [loopRow()] }))).toBe(`; loop check on ${DEFAULT_REPORT.prompts} prompts, one random stream`);
  expect(reportOf(free({ ...sampled, greedy_loop_check: [loopRow(241)] }))).toBe('');
});

test("where the defaults stand: one line per pair and seed, each target marked as the report's figures meet it or not", () => {
  const dir = mkdtempSync(join(tmpdir(), 'standing-'));
  try {
    const run = (routerPpl: number, routerRep4: number, tf: number) => ({
      training: {
        held_out_report: {
          teacher_forced: [{ share: 0.3, router: tf, top1: 0.2 }],
          free_running: {
            at_share: [0.1, 0.3].map((share) => ({
              share,
              router: { ppl_cloud: routerPpl, routed_share: share },
              top1: { ppl_cloud: 2.5, routed_share: share + 0.01 },
            })),
            greedy_loop_check: [0.1, 0.3].map((share) => ({ share, router: { rep4: routerRep4 }, random: { rep4: 0.1 } })),
          },
        },
      },
    });
    const write = (name: string, data: unknown) =>
      writeFileSync(
        join(dir, `${name}.jsonl`),
        `${JSON.stringify({ command: 'bun run router train --edge-model models/a --cloud-model models/b --json', date: '2026-11-29T00:00:00Z', machine: { cpu: 'x', cores: 2, load_average_start: [1], load_average_end: [1] } })}\n${JSON.stringify(data)}\n`,
      );
    write('router-ablation-ab-defaults-seed-1', run(2.6, 0.12, 0.59994));
    write('router-ablation-ab-defaults', run(2.4, 0.05, 0.61));
    write('router-ablation-ab-loop-cost-1', run(9, 9, 0));
    const lines = standingMarkdown(dir).split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[2]).toBe(
      '| a → b | 0 | 2.40 / 2.50 ✓; 2.40 / 2.50 ✓ | 0.050 / 0.100 ✓; 0.050 / 0.100 ✓ | 61.0% ✓ | [ab-defaults](results/router-ablation-ab-defaults.jsonl) |',
    );
    // A miss by a hundredth of a point is not shown as the target itself.
    expect(lines[3]).toBe(
      '| a → b | 1 | 2.60 / 2.50 ✗; 2.60 / 2.50 ✗ | 0.120 / 0.100 ✗; 0.120 / 0.100 ✗ | 59.99% ✗ | [ab-defaults-seed-1](results/router-ablation-ab-defaults-seed-1.jsonl) |',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a page without the markers is refused', () => {
  expect(() => pageWithAblation('# nothing here', '| a |')).toThrow('has no section between');
});
