/**
 * What the tools that write (`models prepare|random|expose-hidden`, `router train`, `bun run eval`) do to what
 * is already at their output, run as the user runs them (child processes): an existing --out is refused
 * unless it is new, an empty folder, or, with --force, a folder this project's tools wrote (its
 * written-by.json); a folder without the marker, a plain file, a FIFO or a link is never touched, even
 * with --force. `models prepare` reads only regular files inside the hub folder, of sizes config.json
 * allows. `router train` with its output in a pipe prints progress lines.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { buildDemoPacks } from '../src/tools/models/demo.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { hubExport, layOutHubDownload } from './helpers/hub-downloads.ts';

const work = mkdtempSync(join(tmpdir(), 'tool-outputs-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function tool(script: string, ...args: string[]) {
  // Bounded: a tool that opened a FIFO or read /dev/zero would never end.
  const r = Bun.spawnSync(['bun', script, ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe', timeout: 60_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}
const models = (...args: string[]) => tool('src/tools/models/cli.ts', ...args);
const router = (...args: string[]) => tool('src/tools/router/cli.ts', ...args);

function mkfifo(path: string): void {
  expect(Bun.spawnSync(['mkfifo', path]).exitCode).toBe(0);
}

/** Things a user keeps where a tool might be pointed: each must be exactly as it was after every refusal. */
function userThings(dir: string) {
  mkdirSync(dir);
  const folder = join(dir, 'precious');
  mkdirSync(folder);
  writeFileSync(join(folder, 'precious.txt'), 'keep me');
  const file = join(dir, 'notes.txt');
  writeFileSync(file, 'my notes');
  const fifo = join(dir, 'fifo');
  mkfifo(fifo);
  const link = join(dir, 'link');
  symlinkSync(folder, link);
  return {
    folder,
    file,
    fifo,
    link,
    intact() {
      expect(readFileSync(join(folder, 'precious.txt'), 'utf8')).toBe('keep me');
      expect(readdirSync(folder)).toEqual(['precious.txt']);
      expect(readFileSync(file, 'utf8')).toBe('my notes');
      expect(lstatSync(fifo).isFIFO()).toBe(true);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([]);
    },
  };
}

beforeAll(async () => {
  await ensureDemoPacks();
}, 180_000);

describe('models prepare --out', () => {
  let hub: string;
  beforeAll(() => {
    hub = layOutHubDownload(work, 'hub', { from: hubExport('stories260k-3l-hf'), files: ['model.onnx'] });
  });

  test('a folder it did not write, a file, a FIFO, a link: refused with and without --force, each left as it was', () => {
    const mine = userThings(join(work, 'mine'));
    const cases: [string, RegExp][] = [
      [mine.folder, /is a folder this project's tools did not write \(no written-by\.json in it\): models prepare never replaces it, even with --force/],
      [mine.file, /is a file: models prepare writes a folder there .* never a file, even with --force/],
      [mine.fifo, /is a FIFO: .* never a FIFO, even with --force/],
      [mine.link, /is a symbolic link: .* even with --force/],
    ];
    for (const [out, message] of cases) {
      for (const force of [[], ['--force']]) {
        const r = models('prepare', hub, '--out', out, ...force);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain(`--out ${out}`);
        expect(r.stderr).toMatch(message);
        mine.intact();
      }
    }
  });

  test('an empty folder is written into; the pack it wrote is refused without --force and replaced with it', () => {
    const out = join(work, 'empty');
    mkdirSync(out);
    expect(models('prepare', hub, '--out', out).code).toBe(0);
    expect(JSON.parse(readFileSync(join(out, 'written-by.json'), 'utf8'))).toMatchObject({ tool: 'models prepare' });
    writeFileSync(join(out, 'stale.txt'), 'from before');
    const again = models('prepare', hub, '--out', out);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`--out ${out} already holds a folder written by models prepare: pass --force to replace it`);
    expect(existsSync(join(out, 'stale.txt'))).toBe(true);
    const forced = models('prepare', hub, '--out', out, '--force');
    expect(forced.code).toBe(0);
    expect(existsSync(join(out, 'stale.txt'))).toBe(false);
    expect(existsSync(join(out, 'model.onnx'))).toBe(true);
    expect(readdirSync(work).filter((f) => f.includes('.partial-'))).toEqual([]);
  });

  test('a missing parent is created; a path through a missing folder and back up names what is there, not a raw ENOENT', () => {
    const nested = join(work, 'new', 'deeper', 'pack');
    expect(models('prepare', hub, '--out', nested).code).toBe(0);
    expect(existsSync(join(nested, 'model.onnx'))).toBe(true);
    const upAndBack = `${join(work, 'mine', 'absent')}/..`;
    const r = models('prepare', hub, '--out', upAndBack);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`--out ${join(work, 'mine')} is a folder this project's tools did not write`);
    expect(r.stderr).not.toContain('ENOENT');
  });
});

describe('models prepare reads only regular files inside the hub folder, of sizes config.json allows', () => {
  const from = hubExport('stories260k-3l-hf');
  let n = 0;
  const hubWith = (change: (hub: string) => void) => {
    const root = join(work, `reading-${n++}`);
    mkdirSync(root);
    const hub = layOutHubDownload(root, 'hub', { from, files: ['model.onnx'] });
    change(hub);
    return { hub, out: join(root, 'pack'), root };
  };
  const outside = join(work, 'outside-secret.txt');
  beforeAll(() => writeFileSync(outside, "not the model's"));

  const cases: [string, (hub: string) => void, (hub: string) => string][] = [
    [
      'a chat template linking out of the folder (absolute link)',
      (h) => symlinkSync(outside, join(h, 'chat_template.jinja')),
      (h) => `${join(h, 'chat_template.jinja')} is a link to ${outside}, outside the hub folder`,
    ],
    [
      'a tokenizer.json linking out by a relative path',
      (h) => (unlinkSync(join(h, 'tokenizer.json')), symlinkSync('../../outside-secret.txt', join(h, 'tokenizer.json'))),
      (h) => `${join(h, 'tokenizer.json')} is a link to ${outside}, outside the hub folder`,
    ],
    [
      'onnx/model.onnx linking to /dev/zero',
      (h) => (unlinkSync(join(h, 'onnx', 'model.onnx')), symlinkSync('/dev/zero', join(h, 'onnx', 'model.onnx'))),
      (h) => `${join(h, 'onnx', 'model.onnx')} is a link to /dev/zero, outside the hub folder`,
    ],
    [
      'onnx/model.onnx a FIFO',
      (h) => (unlinkSync(join(h, 'onnx', 'model.onnx')), mkfifo(join(h, 'onnx', 'model.onnx'))),
      (h) => `${join(h, 'onnx', 'model.onnx')} is a FIFO, not a regular file`,
    ],
    ['a chat template that is a FIFO', (h) => mkfifo(join(h, 'chat_template.jinja')), (h) => `${join(h, 'chat_template.jinja')} is a FIFO, not a regular file`],
    [
      'external data far larger than config.json allows (a sparse file)',
      (h) => (writeFileSync(join(h, 'onnx', 'model.onnx_data'), ''), truncateSync(join(h, 'onnx', 'model.onnx_data'), 8 * 2 ** 30)),
      (h) => `${join(h, 'onnx', 'model.onnx_data')} is ${8 * 2 ** 30} bytes, more than config.json's sizes allow`,
    ],
  ];
  test.each(cases)(
    '%s: refused by name, nothing written',
    (_name, change, message) => {
      const { hub, out, root } = hubWith(change);
      const r = models('prepare', hub, '--out', out);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(message(hub));
      expect(existsSync(out)).toBe(false);
      expect(readdirSync(root)).toEqual(['hub']);
    },
    30_000,
  );

  test('links inside the folder, as a Hugging Face cache snapshot has them into its blobs, are read', () => {
    const repo = join(work, 'models--x--stories');
    const snapshot = layOutHubDownload(join(repo, 'snapshots'), 'abc123', { from, files: ['model.onnx'] });
    mkdirSync(join(repo, 'blobs'));
    for (const f of ['config.json', 'tokenizer.json', join('onnx', 'model.onnx')]) {
      const blob = join(repo, 'blobs', f.replaceAll('/', '-'));
      cpSync(join(snapshot, f), blob);
      unlinkSync(join(snapshot, f));
      symlinkSync(f.includes('/') ? `../../../blobs/${f.replaceAll('/', '-')}` : `../../blobs/${f}`, join(snapshot, f));
    }
    const r = models('prepare', snapshot, '--out', join(work, 'from-cache'));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  }, 30_000);
});

describe('the other writers', () => {
  test('models random: its own pack refused without --force, replaced with it; never a folder without the marker', () => {
    const out = join(work, 'random');
    expect(models('random', '--preset', 'tiny-qwen2', '--out', out).code).toBe(0);
    const refused = models('random', '--preset', 'tiny-qwen2', '--out', out);
    expect([refused.code, refused.stderr.trim()]).toEqual([
      1,
      `error: --out ${out} already holds a folder written by models random: pass --force to replace it`,
    ]);
    expect(models('random', '--preset', 'tiny-qwen2', '--out', out, '--force').code).toBe(0);
    rmSync(join(out, 'written-by.json'));
    rmSync(join(out, 'pack-source.json'));
    expect(models('random', '--preset', 'tiny-qwen2', '--out', out, '--force').stderr).toContain("is a folder this project's tools did not write");
    expect(existsSync(join(out, 'model.onnx'))).toBe(true);
  });

  test('models expose-hidden: an existing file replaced only with --force, a FIFO never', () => {
    const pack = join(work, 'random');
    const target = join(work, 'exposed.onnx');
    writeFileSync(target, 'mine');
    const refused = models('expose-hidden', '--in', pack, '--out', target);
    expect([refused.code, refused.stderr.trim()]).toEqual([1, `error: ${target} already exists: pass --force to replace it`]);
    expect(readFileSync(target, 'utf8')).toBe('mine');
    expect(models('expose-hidden', '--in', pack, '--out', target, '--force').code).toBe(0);
    expect(readFileSync(target).byteLength).toBeGreaterThan(1000);
    const fifo = join(work, 'exposed-fifo.onnx');
    mkfifo(fifo);
    expect(models('expose-hidden', '--in', pack, '--out', fifo, '--force').stderr).toContain(
      `${fifo} is a FIFO: models expose-hidden writes a file there and replaces only a regular file`,
    );
    expect(lstatSync(fifo).isFIFO()).toBe(true);
  });

  test('bun run eval: an existing --dump file or plot refused before the evaluation runs', () => {
    const dump = join(work, 'positions.jsonl');
    writeFileSync(dump, 'mine');
    const eval_ = (...args: string[]) => tool('src/tools/eval/cli.ts', '--dataset', DEMO.tinyStories, ...args);
    const r = eval_('--dump', dump);
    expect([r.code, r.stderr.trim()]).toEqual([1, `error: ${dump} already exists: pass --force to replace it`]);
    const plots = join(work, 'plots');
    mkdirSync(plots);
    writeFileSync(join(plots, 'mine-quality.svg'), '<svg/>');
    const p = eval_('--out', plots, '--name', 'mine');
    expect([p.code, p.stderr.trim()]).toEqual([1, `error: --out ${plots} already holds mine-quality.svg: pass --force to replace them, or another --name`]);
    expect(readFileSync(dump, 'utf8')).toBe('mine');
  });
});

describe('router train', () => {
  const text = join(work, 'stories.txt');
  const out = join(work, 'router');
  const train = (...extra: string[]) =>
    router(
      'train',
      '--edge-model',
      DEMO.edgePack,
      '--cloud-model',
      DEMO.cloudPack,
      '--text',
      text,
      '--out',
      out,
      '--epochs',
      '3',
      '--hidden-units',
      '8',
      '--members',
      '1',
      '--rounds',
      '0',
      '--features',
      'hidden',
      '--labels',
      'citer',
      '--report-documents',
      '0',
      ...extra,
    );
  beforeAll(() => {
    writeFileSync(
      text,
      readFileSync(DEMO.tinyStories, 'utf8')
        .split(/\n\s*\n/)
        .slice(0, 10)
        .join('\n\n'),
    );
  });

  test('with stderr a pipe it prints progress lines; its pack is refused without --force and replaced with it', () => {
    const r = train();
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^\[\d+ s\] teacher forcing: 0\/8 \(0%\)$/m);
    expect(r.stderr).toMatch(/^\[\d+ s\] training: 0\/3 \(0%\)$/m);
    expect(JSON.parse(readFileSync(join(out, 'written-by.json'), 'utf8'))).toMatchObject({ tool: 'router train' });
    const refused = train();
    expect([refused.code, refused.stderr.trim()]).toEqual([
      1,
      `error: --out ${out} already holds a folder written by router train: pass --force to replace it`,
    ]);
    expect(train('--force').code).toBe(0);
  }, 120_000);

  test('a folder it did not write is refused before training, even with --force', () => {
    const mine = userThings(join(work, 'router-mine'));
    for (const target of [mine.folder, mine.file, mine.fifo]) {
      const r = router('train', '--edge-model', DEMO.edgePack, '--cloud-model', DEMO.cloudPack, '--text', text, '--out', target, '--force');
      expect(r.code).toBe(1);
      expect(r.stderr).not.toContain('teacher forcing');
      expect(r.stderr).toContain(`--out ${target} is`);
    }
    mine.intact();
  });
});

test('the demo builder rebuilds a stale pack it wrote (an older one without the marker too) without --force; a folder it did not write is refused', async () => {
  const dir = join(work, 'demo');
  mkdirSync(dir);
  const paths = { ...DEMO, cloudPack: join(dir, 'cloud'), edgePack: join(dir, 'edge'), routerPack: join(dir, 'router') };
  for (const [from, to] of [
    [DEMO.cloudPack, paths.cloudPack],
    [DEMO.edgePack, paths.edgePack],
    [DEMO.routerPack, paths.routerPack],
  ] as const)
    cpSync(from, to, { recursive: true });
  const stale = (pack: string) => writeFileSync(join(pack, 'pack-source.json'), JSON.stringify({ tool: 'convert-llama2c', converterVersion: 0 }));
  rmSync(join(paths.edgePack, 'written-by.json'), { force: true });
  stale(paths.edgePack);
  expect(await buildDemoPacks(paths)).toEqual([paths.edgePack]);
  expect(JSON.parse(readFileSync(join(paths.edgePack, 'written-by.json'), 'utf8'))).toMatchObject({ tool: 'models convert-llama2c' });
  stale(paths.edgePack);
  expect(await buildDemoPacks(paths)).toEqual([paths.edgePack]);
  for (const f of ['written-by.json', 'pack-source.json']) rmSync(join(paths.edgePack, f));
  writeFileSync(join(paths.edgePack, 'precious.txt'), 'keep me');
  await expect(buildDemoPacks(paths)).rejects.toThrow(`--out ${paths.edgePack} is a folder this project's tools did not write`);
  expect(readFileSync(join(paths.edgePack, 'precious.txt'), 'utf8')).toBe('keep me');
}, 60_000);
