/**
 * The ablation table in docs/router-training.md is what the recorded `router train` runs render
 * (scripts/router-ablation-table.ts), and the renderer reads a run's pair and variant from its command.
 */
import { expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { ABLATION_PAGE, ablationMarkdown, pageWithAblation, pairOf, variantOf } from '../scripts/router-ablation-table.ts';

test('docs/router-training.md shows the table the recorded runs render (bun scripts/router-ablation-table.ts --write)', () => {
  const page = readFileSync(ABLATION_PAGE, 'utf8');
  expect(pageWithAblation(page, ablationMarkdown())).toBe(page);
});

test("a run's pair and variant come from its saved command", () => {
  const command =
    'bun run router train --edge-model models/stories260k-3l --cloud-model models/stories260k --text x.txt --out /tmp/r --rollout-labels divergence --features hidden,logit_stats --json';
  expect(pairOf(command)).toBe('stories260k-3l → stories260k');
  expect(variantOf(command)).toBe('`--rollout-labels divergence` `--features hidden,logit_stats`');
  expect(variantOf('bun run router train --edge-model a --cloud-model b --text t --out o --json')).toBe('defaults');
});

test('a page without the markers is refused', () => {
  expect(() => pageWithAblation('# nothing here', '| a |')).toThrow('has no section between');
});
