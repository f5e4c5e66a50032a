/**
 * The ablation table in docs/router-training.md is what the recorded `router train` runs render
 * (scripts/router-ablation-table.ts), and the renderer reads a run's pair and variant from its command.
 */
import { expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { ABLATION_PAGE, ablationMarkdown, onPolicyGainMarkdown, pageWithAblation, pairOf, variantOf } from '../scripts/router-ablation-table.ts';
import { Fields } from '../scripts/results/data-file.ts';
import { FEATURE_GROUPS } from '../src/edge/routing/router-features.ts';

test('docs/router-training.md shows the table the recorded runs render (bun scripts/router-ablation-table.ts --write)', () => {
  const page = readFileSync(ABLATION_PAGE, 'utf8');
  expect(pageWithAblation(page, ablationMarkdown(), onPolicyGainMarkdown())).toBe(page);
});

test("a run's pair comes from its saved command, its variant from its router.json", () => {
  const command = 'bun run router train --edge-model models/stories260k-3l --cloud-model models/stories260k --text x.txt --out /tmp/r --json';
  expect(pairOf(command)).toBe('stories260k-3l → stories260k');
  const meta = (features: string[], rounds: number, members: number) =>
    new Fields('x', {
      features,
      training: { label_rule: 'mixed-gain', on_policy_label_rule: 'cloud-nll', rounds: Array.from({ length: rounds + 1 }, () => ({})), members },
    });
  expect(variantOf(meta([...FEATURE_GROUPS], 3, 3))).toBe('text: mixed-gain; rollouts: cloud-nll');
  expect(variantOf(meta(['hidden', 'logit_stats'], 0, 1))).toBe(
    'text: mixed-gain; rollouts: cloud-nll; without previous_hidden, repetition, position, token; 0 rounds; 1 member',
  );
});

test('a page without the markers is refused', () => {
  expect(() => pageWithAblation('# nothing here', '| a |')).toThrow('has no section between');
});
