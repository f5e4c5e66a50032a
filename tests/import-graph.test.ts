/**
 * Edge and cloud meet only through src/shared and proto/: no module of src/cloud or src/shared imports
 * src/edge, and no module of src/edge imports src/cloud. Checked on every relative import specifier.
 */
import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { PROJECT_ROOT } from '../src/shared/paths.ts';

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

/** `area` of a file: edge, cloud, shared or other, by its folder under src/. */
function area(file: string): string {
  return relative(join(PROJECT_ROOT, 'src'), file).split('/')[0]!;
}

const FORBIDDEN: Record<string, string[]> = { cloud: ['edge'], shared: ['edge', 'cloud'], edge: ['cloud'] };

test('src/cloud and src/shared never import src/edge; src/edge never imports src/cloud', () => {
  const arrows: string[] = [];
  for (const file of sourceFiles(join(PROJECT_ROOT, 'src'))) {
    const from = area(file);
    const text = readFileSync(file, 'utf8');
    for (const [, spec] of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const to = area(resolve(dirname(file), spec!));
      if (FORBIDDEN[from]?.includes(to)) arrows.push(`${relative(PROJECT_ROOT, file)} → ${spec}`);
    }
  }
  expect(arrows).toEqual([]);
});
