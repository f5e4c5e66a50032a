/**
 * Regenerates tests/fixtures/greedy-identity.json: the demo pair's outputs for the fixed cases of
 * tests/helpers/greedy-identity.ts, stamped with the commit that produced them. Run it on the code a
 * behaviour-preserving change starts from, then commit the fixture before the change.
 *
 * @example
 * bun scripts/greedy-identity.ts
 */
import { join } from 'node:path';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { runGreedyIdentityCases } from '../tests/helpers/greedy-identity.ts';

const commit = Bun.spawnSync(['git', 'rev-parse', 'HEAD'], { cwd: PROJECT_ROOT }).stdout.toString().trim();
const dirty = Bun.spawnSync(['git', 'status', '--porcelain', '--', 'src'], { cwd: PROJECT_ROOT }).stdout.toString().trim() !== '';
const runs = await runGreedyIdentityCases();
const fixture = {
  about: `Greedy (and one seeded) outputs of the demo pair through a real shim, produced by scripts/greedy-identity.ts at commit ${commit}${dirty ? ' with uncommitted changes under src/' : ''}`,
  commit,
  runs,
};
const path = join(PROJECT_ROOT, 'tests/fixtures/greedy-identity.json');
await Bun.write(path, `${JSON.stringify(fixture, null, 2)}\n`);
console.log(`${runs.length} runs written to ${path}`);
process.exit(0);
