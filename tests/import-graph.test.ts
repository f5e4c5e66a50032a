/**
 * The layers meet only in the allowed direction, checked on every relative import specifier under src/:
 * - edge and cloud meet only through src/shared and proto/: no module of src/cloud or src/shared imports
 *   src/edge, and no module of src/edge imports src/cloud;
 * - the tools: src/tools/lab (what the evaluation and router training share) imports neither
 *   src/tools/eval nor src/tools/router, and src/tools/router never imports src/tools/eval (eval may
 *   import router: it evaluates trained routers).
 */
import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { PROJECT_ROOT } from '../src/shared/paths.ts';

const SRC = join(PROJECT_ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

/** The layer of a file under src/: its first folder, and for src/tools its second (`tools/lab`, `tools/eval`, ...). */
function layer(file: string): string {
  const path = relative(SRC, file);
  const [first, second] = path.split('/');
  return first === 'tools' && second && !second.includes('.') ? `tools/${second}` : first!;
}

/** Every relative import under src/, as [importing file, its layer, imported layer, specifier]. */
function imports(): { file: string; from: string; to: string; spec: string }[] {
  return sourceFiles(SRC).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map(([, spec]) => ({
      file: relative(PROJECT_ROOT, file),
      from: layer(file),
      to: layer(resolve(dirname(file), spec!)),
      spec: spec!,
    }));
  });
}

const FORBIDDEN: Record<string, string[]> = {
  cloud: ['edge'],
  shared: ['edge', 'cloud'],
  edge: ['cloud'],
  'tools/lab': ['tools/eval', 'tools/router'],
  'tools/router': ['tools/eval'],
};

test('src/cloud and src/shared never import src/edge; src/edge never imports src/cloud; tools: lab imports neither eval nor router, router never imports eval', () => {
  const arrows = imports()
    .filter((i) => FORBIDDEN[i.from]?.includes(i.to))
    .map((i) => `${i.file} → ${i.spec}`);
  expect(arrows).toEqual([]);
});

test('the scan sees the tools layers: eval imports router and lab, router imports lab', () => {
  // Guards the rule above against passing vacuously (a layer named wrongly, imports not found).
  const seen = new Set(imports().map((i) => `${i.from} → ${i.to}`));
  for (const arrow of ['tools/eval → tools/router', 'tools/eval → tools/lab', 'tools/router → tools/lab', 'tools/lab → edge']) {
    expect(seen.has(arrow)).toBe(true);
  }
});

test('each side keeps at most 12 files at its top: the rest live in rooms (.dependency-cruiser.cjs orders them)', () => {
  const tops = ['shared', 'cloud', 'edge'].map((side) => {
    const files = readdirSync(join(SRC, side), { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name);
    return { side, files: files.length <= 12 ? files.length : files };
  });
  expect(tops.filter((t) => typeof t.files !== 'number')).toEqual([]);
});

test('the room order names every room of each side: a folder it does not place would escape the rules', () => {
  const order = readFileSync(join(PROJECT_ROOT, '.dependency-cruiser.cjs'), 'utf8');
  // A room is placed by its own pattern (^src/edge/loop/) or inside an alternation (^src/edge/(http|grpc)/).
  const placed = (side: string, room: string) =>
    order.includes(`^src/${side}/${room}/`) || new RegExp(`\\^src/${side}/\\([^)]*\\b${room}\\b[^)]*\\)/`).test(order);
  const unplaced = ['shared', 'cloud', 'edge'].flatMap((side) =>
    readdirSync(join(SRC, side), { withFileTypes: true })
      .filter((e) => e.isDirectory() && !placed(side, e.name))
      .map((e) => `${side}/${e.name}`),
  );
  expect(unplaced).toEqual([]);
});
