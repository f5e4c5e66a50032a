/**
 * The held-out report's sampled free-running runs: every router samples prompt i with the same seed, so
 * where none of them routes they write the same text, and a run is the same every time it is made, however
 * many prompts it generates at once.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { EntropyRouter } from '../src/tools/lab/baseline-routers.ts';
import { InProcessScorer } from '../src/tools/lab/cloud-scorer.ts';
import { GenerationRuns, standardRouters } from '../src/tools/lab/generation-settings.ts';
import { generateAll } from '../src/tools/lab/generation-runs.ts';
import type { Router } from '../src/edge/routing/router.ts';
import { RandomRouter } from '../src/tools/lab/baseline-routers.ts';
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

test('prompts generated at once give the items generated one at a time; a failing prompt fails the run with its own error', async () => {
  const edge = { edgeModel: pair.edge, tokenizer: pair.tokenizer, cloud: pair.cloud };
  const prompts = [...PROMPTS, ...PROMPTS.map((p) => `${p} and then`)];
  const settings = { threshold: 0.3, maxNewTokens: 10, temperature: 1, seed: 3 };
  // The random baseline per prompt, as GenerationRuns gives it: its draws then do not depend on the lanes.
  const random = (i: number) => new RandomRouter(11 + i);
  const alone = await generateAll(edge, random, prompts, { ...settings, lanes: 1 });
  const atOnce = await generateAll(edge, random, prompts, { ...settings, lanes: 3 });
  expect(atOnce).toEqual(alone);
  expect(alone.routed).toBeGreaterThan(0);
  const failing = (i: number): Router => {
    const inner = new RandomRouter(i);
    return {
      info: inner.info,
      score: async () => {
        if (i === 5) throw new Error('router of prompt 5 failed');
        return inner.score();
      },
      release: () => inner.release(),
    };
  };
  await expect(generateAll(edge, failing, prompts, { ...settings, lanes: 3 })).rejects.toThrow('router of prompt 5 failed');
});
