/**
 * Behaviour unchanged: the demo pair's outputs through the edge runtime and a real shim, in every mode, are
 * those of the committed fixture (tests/fixtures/greedy-identity.json, made by scripts/greedy-identity.ts on
 * the code before the loop's state, replies and speculation were reworked).
 */
import { expect, test } from 'bun:test';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { runGreedyIdentityCases, type GreedyIdentityRun } from './helpers/greedy-identity.ts';

test('every case emits exactly the tokens, sources and text of the fixture', async () => {
  const fixture = (await Bun.file(join(PROJECT_ROOT, 'tests/fixtures/greedy-identity.json')).json()) as { runs: GreedyIdentityRun[] };
  const runs = await runGreedyIdentityCases();
  expect(runs.map((r) => `${r.case} | ${r.prompt}`)).toEqual(fixture.runs.map((r) => `${r.case} | ${r.prompt}`));
  for (const [i, run] of runs.entries()) expect({ at: run.case, ...run }).toEqual({ at: run.case, ...fixture.runs[i]! });
  // The fixture is not vacuous: the cloud chose tokens, the edge did, and the privacy layer kept a value home.
  const sources = new Set(fixture.runs.flatMap((r) => r.tokens.map((t) => t.split(':')[1])));
  expect([...sources].sort()).toEqual(['llm', 'slm']);
  expect(fixture.runs.some((r) => r.cloudText.includes('[NAME_1]'))).toBe(true);
}, 600_000);
