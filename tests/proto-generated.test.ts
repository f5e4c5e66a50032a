/**
 * The TypeScript types in src/shared/grpc/generated are generated from proto/ (`bun run proto:gen`); a proto
 * change without regenerating them would let the code type-check against a contract that no longer exists.
 */
import { expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { PROJECT_ROOT } from '../src/shared/paths.ts';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

test('the generated proto types are up to date with proto/', () => {
  const out = mkdtempSync(join(tmpdir(), 'proto-gen-'));
  try {
    const script = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).scripts['proto:gen'] as string;
    const args = script.split(/\s+/).map((a) => (a === 'src/shared/grpc/generated' ? out : a));
    const r = Bun.spawnSync(['bunx', '--bun', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
    expect(r.stderr.toString()).toBe('');
    expect(r.exitCode).toBe(0);
    const committed = join(PROJECT_ROOT, 'src/shared/grpc/generated');
    const fresh = files(out)
      .map((f) => relative(out, f))
      .sort();
    expect(
      files(committed)
        .map((f) => relative(committed, f))
        .sort(),
    ).toEqual(fresh);
    for (const name of fresh) expect(`${name}\n${readFileSync(join(committed, name), 'utf8')}`).toBe(`${name}\n${readFileSync(join(out, name), 'utf8')}`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
