/**
 * docs/architecture.md names files, classes and functions for a newcomer to open: each must be where the page
 * says. A path in backticks must exist; a bare file name must name a file under src/ or views/; a code name
 * (`GenerationState`, `EdgeRuntime.start`, `decideNextPass`) must be declared in src/ or views/, a member
 * (`A.b`) in the file that declares `A`, and a name given with its file (`` `DecoderSequence` (`src/...`) ``) in
 * that very file.
 */
import { describe, expect, test } from 'bun:test';
import { Glob } from 'bun';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { PROJECT_ROOT } from '../src/shared/paths.ts';

const PAGE = readFileSync(join(PROJECT_ROOT, 'docs/architecture.md'), 'utf8');
const SOURCES = [...new Glob('{src,views}/**/*.{ts,tsx}').scanSync(PROJECT_ROOT)]
  .filter((path) => !path.includes('/generated/'))
  .map((path) => ({ path, text: readFileSync(join(PROJECT_ROOT, path), 'utf8') }));

/** Every `code span` of the page outside code blocks. */
function codeSpans(markdown: string): string[] {
  return [...markdown.replace(/```[\s\S]*?```/g, '').matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
}

const patterns = new Map<string, { defines: RegExp; reexports: RegExp }>();

/** Whether `text` defines `name` (a class, function, constant, type or member), or only exports it from elsewhere. */
function declares(text: string, name: string, options: { reexport: boolean } = { reexport: true }): boolean {
  let p = patterns.get(name);
  if (!p) {
    const defines = new RegExp(
      `(?:class|function\\*?|const|let|interface|type|enum)\\s+${name}\\b|^\\s*(?:(?:export|async|static|readonly|private|get)\\s+|\\*)*${name}\\s*[(<=:]`,
      'm',
    );
    p = { defines, reexports: new RegExp(`export\\s*(?:type\\s*)?\\{[^}]*\\b${name}\\b`) };
    patterns.set(name, p);
  }
  return p.defines.test(text) || (options.reexport && p.reexports.test(text));
}

/** Names that live outside the tree: the platform's, and RPCs declared in proto/. */
const PROTO = [...new Glob('proto/*.proto').scanSync(PROJECT_ROOT)].map((path) => readFileSync(join(PROJECT_ROOT, path), 'utf8')).join('\n');
const outside = (name: string) => name in globalThis || new RegExp(`\\brpc\\s+${name}\\b`).test(PROTO);

const spans = codeSpans(PAGE);
const paths = spans.filter((span) => /^(?:src|views|proto)\/\S+$/.test(span) && !span.includes(' '));
const fileNames = spans.filter((span) => /^[\w.-]+\.(?:ts|tsx)$/.test(span));
// Code names: camelCase or PascalCase, optionally `Owner.member`; words of the wire (`slm`, `small_only`) have no capital.
const codeNames = spans.map((span) => span.replace(/\(\)$/, '')).filter((span) => /^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?$/.test(span) && /[A-Z]/.test(span));

describe('docs/architecture.md', () => {
  test('names enough of the tree for the checks below to mean something', () => {
    expect(paths.length).toBeGreaterThan(25);
    expect(codeNames.length).toBeGreaterThan(30);
  });

  test('every path it gives exists', () => {
    expect(paths.filter((path) => !existsSync(join(PROJECT_ROOT, path.replace(/\/$/, ''))))).toEqual([]);
  });

  test('every bare file name names a file under src/ or views/', () => {
    expect(fileNames.filter((name) => !SOURCES.some((s) => basename(s.path) === name))).toEqual([]);
  });

  test("every class, function and member it names is declared, a member in its owner's file", () => {
    const missing = codeNames.filter((name) => {
      const [owner, member] = name.split('.') as [string, string | undefined];
      const homes = SOURCES.filter((s) => declares(s.text, owner));
      if (member === undefined) return homes.length === 0 && !outside(owner);
      return !homes.some((s) => declares(s.text, member));
    });
    expect(missing).toEqual([]);
  });

  test('a name followed by its file, `Name` (`path`) or `Name` in `path`, is defined in that file, not only re-exported there', () => {
    const placed = [...PAGE.matchAll(/`([A-Za-z_]\w*)(?:\(\))?`,? (?:\(|in )`((?:src|views)\/[\w/.-]+\.tsx?)`/g)].map((m) => ({ name: m[1]!, path: m[2]! }));
    expect(placed.length).toBeGreaterThan(10);
    const misplaced = placed.filter(({ name, path }) => !declares(readFileSync(join(PROJECT_ROOT, path), 'utf8'), name, { reexport: false }));
    expect(misplaced).toEqual([]);
  });
});
