/**
 * A router pack names the edge model it was trained on (router.json's `edge_model`: the tokenizer's
 * fingerprint, the hidden size, a digest of config.json's architecture), and the edge refuses it at start on
 * any other model, naming both and `--router builtin`, which always starts. The case that ran without a word:
 * `models prepare` on a hub folder, then the command it printed, with the demo router (trained for the
 * distilled 1-layer model) on a 3-layer one, writing `Once Once Once …`. Through the real components: the
 * `router train` and `models prepare` CLIs and the edge as processes, loadEdgeEngine on real packs.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEdgeEngine } from '../src/edge/server/load-edge-engine.ts';
import { edgeModelIdentity } from '../src/edge/routing/edge-model-identity.ts';
import { DEMO, PROJECT_ROOT, TRUNCATED_DEMO } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { hubExport, layOutHubDownload } from './helpers/hub-downloads.ts';
import { collectOutput, exitWithin } from './helpers/process-output.ts';

const work = mkdtempSync(join(tmpdir(), 'router-edge-model-'));
/** A router trained here, for the demo edge model, by `router train` (small: seconds). */
const trained = join(work, 'router-distilled');

beforeAll(async () => {
  await ensureDemoPacks();
  const text = join(work, 'text.txt');
  writeFileSync(
    text,
    readFileSync(DEMO.tinyStories, 'utf8')
      .split(/\n\s*\n/)
      .slice(0, 30)
      .join('\n\n'),
  );
  const args = [
    '--edge-model',
    DEMO.edgePack,
    '--cloud-model',
    DEMO.cloudPack,
    '--text',
    text,
    '--out',
    trained,
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
  ];
  const r = Bun.spawnSync(['bun', 'src/tools/router/cli.ts', 'train', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`router train failed: ${r.stderr.toString()}`);
}, 120_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const routerJson = (dir: string) => JSON.parse(readFileSync(join(dir, 'router.json'), 'utf8')) as Record<string, unknown>;

/** A copy of the router pack with router.json changed by `edit` (the older format, another named model). */
function editedRouter(name: string, edit: (meta: Record<string, unknown>) => Record<string, unknown>): string {
  const dir = join(work, name);
  cpSync(trained, dir, { recursive: true });
  writeFileSync(join(dir, 'router.json'), JSON.stringify(edit(routerJson(trained))));
  return dir;
}

describe('router.json names the edge model it was trained on', () => {
  test('router train writes edge_model: the tokenizer fingerprint, hidden size and architecture digest of --edge-model', () => {
    expect(routerJson(trained).edge_model).toEqual(edgeModelIdentity(DEMO.edgePack));
    expect(routerJson(trained).edge_model).toMatchObject({ name: 'stories260k-distilled-1l', hidden_size: 64, num_hidden_layers: 1, vocabulary_size: 512 });
  });

  test('the same model under another folder name loads; another model of the same hidden size and tokenizer is refused, naming both', async () => {
    const copy = join(work, 'renamed-edge-pack');
    cpSync(DEMO.edgePack, copy, { recursive: true, dereference: true });
    const parts = await loadEdgeEngine({ edgeModel: copy, router: trained });
    await parts.release();
    const refused = loadEdgeEngine({ edgeModel: TRUNCATED_DEMO.edgePack, router: trained });
    await expect(refused).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(refused).rejects.toThrow(
      `router ${trained} was trained for edge model stories260k-distilled-1l (hidden size 64, 1 layer, vocabulary 512 ids), not ${TRUNCATED_DEMO.edgePack} (hidden size 64, 3 layers, vocabulary 512 ids): ` +
        'their architecture (config.json) differs, so its scores mean nothing for this model. To run it, start with --router builtin',
    );
  });

  test('a router.json older than edge_model: the folder its slm names is compared when it is there, its name when it is not', async () => {
    const withoutField = (slm: string) => (meta: Record<string, unknown>) => {
      const { edge_model: _field, ...rest } = meta;
      return { ...rest, slm };
    };
    // `slm` names the demo edge pack, which is there: compared by identity, so a renamed copy of it fits too.
    const named = editedRouter('old-named-present', withoutField(DEMO.edgePack));
    await (await loadEdgeEngine({ edgeModel: DEMO.edgePack, router: named })).release();
    await expect(loadEdgeEngine({ edgeModel: TRUNCATED_DEMO.edgePack, router: named })).rejects.toThrow(
      `was trained for edge model ${DEMO.edgePack} (hidden size 64, 1 layer`,
    );
    // `slm` names a folder that is not there: only its name can say, and it must be the edge model's.
    const gone = editedRouter('old-named-gone', withoutField('../elsewhere/stories260k-distilled-1l'));
    await (await loadEdgeEngine({ edgeModel: DEMO.edgePack, router: gone })).release();
    await expect(loadEdgeEngine({ edgeModel: TRUNCATED_DEMO.edgePack, router: gone })).rejects.toThrow(
      `was trained for edge model stories260k-distilled-1l (router.json's slm, a router.json older than its edge_model fingerprint), not stories260k-3l (${TRUNCATED_DEMO.edgePack}). To run it, start with --router builtin`,
    );
  });
});

test('models prepare, then the command it prints: it runs; the same pack with the default (demo) router is refused at start, naming both', async () => {
  const hub = layOutHubDownload(work, 'hub-3l', { from: hubExport('stories260k-3l-hf') });
  const pack = join(work, 'prepared-3l');
  const prepare = Bun.spawnSync(['bun', 'run', 'models', 'prepare', hub, '--out', pack], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
  expect(prepare.exitCode).toBe(0);
  const printed = prepare.stdout
    .toString()
    .split('\n')
    .find((l) => l.trim().startsWith('bun run edge -- '));
  expect(printed?.trim()).toBe(`bun run edge -- --edge-model ${pack} --router builtin`);
  const flags = ['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', 'none'];

  // Without --router: the default is the demo router, trained for another model.
  const refused = Bun.spawn(['bun', 'src/edge/main.ts', '--edge-model', pack, ...flags], { cwd: PROJECT_ROOT, stdout: 'ignore', stderr: 'pipe' });
  const refusal = collectOutput(refused.stderr);
  expect(await exitWithin(refused, 60_000)).toBe(1);
  await refusal.closed;
  expect(refusal.text()).toContain(`error: router ${DEMO.routerPack} was trained for edge model`);
  expect(refusal.text()).toContain(`not ${pack} (hidden size 64, 3 layers, vocabulary 512 ids)`);
  expect(refusal.text()).toContain('start with --router builtin');

  // The printed command (bun run edge -- ARGS), on a free port.
  const args = printed!
    .trim()
    .replace(/^bun run edge -- /, '')
    .split(' ');
  const edge = Bun.spawn(['bun', 'src/edge/main.ts', ...args, ...flags, '--log-level', 'info'], { cwd: PROJECT_ROOT, stdout: 'ignore', stderr: 'pipe' });
  const stderr = collectOutput(edge.stderr);
  try {
    const ready = JSON.parse(await stderr.waitForLine((l) => l.includes('"edge ready"'), 60_000, 'the edge to start')) as { router: string };
    expect(ready.router).toBe('builtin:top1-probability');
  } finally {
    edge.kill('SIGTERM');
    expect(await exitWithin(edge, 20_000)).toBe(0);
  }
}, 120_000);
