/**
 * The held-out report's sampled free-running runs: every router samples prompt i with the same seed, so
 * where none of them routes they write the same text, and a run is the same every time it is made.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { EntropyRouter } from '../src/tools/lab/baseline-routers.ts';
import { InProcessScorer } from '../src/tools/lab/cloud-scorer.ts';
import { GenerationRuns, standardRouters } from '../src/tools/lab/generation-settings.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';

const PROMPTS = ['Once upon a time', 'Tom and Lily went to the park', 'The little dog was sad because', 'One day, a big bird'];
let pair: DemoPairModels;
let runsOf: (sampling?: { temperature: number; seed: number }) => GenerationRuns;

beforeAll(async () => {
  pair = await loadDemoPairModels({ record: false });
  const edge = { edgeModel: pair.edge, tokenizer: pair.tokenizer, cloud: pair.cloud };
  const scorer = new InProcessScorer(pair.cloudModel);
  runsOf = (sampling) => new GenerationRuns(edge, scorer, PROMPTS, 12, standardRouters(new EntropyRouter(), 0), sampling);
});
afterAll(() => pair.release());

const idsOf = async (run: ReturnType<GenerationRuns['run']>) => (await run).items.map((i) => i.ids.join(','));

test('where no router routes, every router samples the same text from each prompt (one seed per prompt)', async () => {
  const runs = runsOf({ temperature: 1, seed: 0 });
  const byRouter = await Promise.all((['router', 'top1', 'entropy', 'random'] as const).map((m) => idsOf(runs.run(m, 0))));
  for (const ids of byRouter.slice(1)) expect(ids).toEqual(byRouter[0]!);
  // Sampled, not the greedy texts.
  const greedy = await idsOf(runsOf().run('top1', 0));
  expect(byRouter[0]).not.toEqual(greedy);
  expect((await runs.run('top1', 0)).routed).toBe(0);
});

test('a sampled run is the same each time it is made, and another seed samples other text', async () => {
  const once = await idsOf(runsOf({ temperature: 1, seed: 0 }).run('top1', 0.5));
  expect(await idsOf(runsOf({ temperature: 1, seed: 0 }).run('top1', 0.5))).toEqual(once);
  expect(await idsOf(runsOf({ temperature: 1, seed: 7 }).run('top1', 0.5))).not.toEqual(once);
});
