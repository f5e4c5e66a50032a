/**
 * A measured figure lives in docs/results/*.jsonl and the generated docs/results.md, with the command,
 * machine and date that made it; comments say why and the README says what is measured, both linking there.
 * The rules (tests/helpers/measured-figures.ts) are checked on text this tree once held, on defaults and
 * examples that must pass, and then on every source file under src/ and on the README.
 */
import { describe, expect, test } from 'bun:test';
import { Glob } from 'bun';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { commentTexts, handTypedFigures, measuredFigures } from './helpers/measured-figures.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';

/** Comments src/ held before the figures moved out, each a measurement. */
const MEASURED = [
  `/**
 * graph with steps of 32 against 256 faulted ~400 pages a step instead of ~600 and ran at a median of
 * 20.7–26.8 ms instead of 22.6–30.1 ms (two runs each, alternating, on a noisy 2-core VM).
 */`,
  `/** 2-core VM, 25 MB of fresh arrays took 15 to 82 ms to fill, 2 ms when reused). */`,
  `/** shape the copy it saves was 25 MB and about 100 ms before the first token. */`,
  `/** Rows at least this long go to onnxruntime (measured: 512 entries 0.005 ms in JS, 0.04 ms in a run). */`,
  `/**
 * and reads better than the edge alone. On the held-out TinyStories paragraphs \`bun run eval\` measured
 * 23.8% of the generated tokens routed (rep4 0.115, cloud perplexity 2.27; small_only 0.209 and 3.14;
 */`,
  `/** The earlier demo pair: the first 3 layers of stories260K with no training (perplexity 47.5 against 4.54). */`,
  `/** saturate (255·127·2 > 32767) and cost the demo pack 11 points of next-token agreement; u8×u8 widens */`,
  `/** text's length: \`\\w{200}x\` scans 256 KiB of text in about a second on one x86-64 core, a 16 KiB prompt in about 60 ms. */`,
  `/** loop, big and entered mid-way, inconsistently (the same epoch took 1 s in one run, 10 s in another). */`,
  `/** Around the demo router's default τ (0.8): 2.5%, 13%, 31% and 61% of the generated tokens routed (measured with --rtt-ms 0). */`,
  `  // section 5) and, where a lone step at the Qwen2.5-0.5B shape, q4, ran 7% slower`,
  `/** steps per round for both, so that a shared machine whose speed moves by 2× within a minute slows both */`,
];

/** Defaults, limits, examples and sizes worked out from shapes: what a comment may say. */
const ALLOWED = [
  `/** Deadline of one step, from sending it to its reply. Default 10 s. */`,
  `/** How old a shim's load report may be and still count; 2 s when omitted. */`,
  `/** Message size limit, both directions. Default 4 MiB. */`,
  `  // A cloud host has memory to spare next to its model; 512 MB is half a GB of reuse at any model size.`,
  `/** const cloud = new GrpcCloudClient({ address: proxy.address }); // ≈ 170 ms round trip */`,
  `/** How late this process's event loop ran a 2 ms timer over the measured window, p99 (loop-lag.ts). */`,
  `/** a row of Qwen's vocabulary (608 KB) into fresh memory faults its pages in on every step */`,
  `/** await router.score(hidden, logits, ids); // < 0.1 for about 10% of positions */`,
  `/** GPU server: the product's 5 s would turn a busy moment into fallback tokens, which a tool refuses. */`,
  `/** At fixed shares (10/20/30/50%) every method routes as many positions, reported as the recovered fraction of the gap. */`,
];

function sourceFiles(): string[] {
  return [...new Glob('src/**/*.{ts,tsx,js,mjs}').scanSync(PROJECT_ROOT)].filter((path) => !path.includes('/generated/')).sort();
}

describe('measured figures in comments', () => {
  test('the comments that held measurements are found, each one', () => {
    expect(MEASURED.filter((comment) => measuredFigures(comment).length === 0)).toEqual([]);
  });

  test('defaults, limits, examples and worked-out sizes pass', () => {
    expect(ALLOWED.flatMap((comment) => measuredFigures(comment))).toEqual([]);
  });

  test('block comments and runs of // lines are read whole, a // comment after code alone, not // in a URL', () => {
    const source = "const url = 'http://x/y'; // after code\n// ran at a median of\n// 20 ms\nconst a = 1;\n/**\n * one\n * two\n */";
    expect(commentTexts(source)).toEqual(['after code', 'ran at a median of 20 ms', ' one two ']);
  });

  test('no comment under src/ gives a measured figure (docs/results.md holds them, with command, machine and date)', () => {
    const files = sourceFiles();
    // Guards the scan against passing vacuously (a wrong root or pattern finding nothing).
    expect(files.length).toBeGreaterThan(300);
    const found = files.flatMap((path) => measuredFigures(readFileSync(join(PROJECT_ROOT, path), 'utf8')).map((sentence) => `${path}: ${sentence}`));
    expect(found).toEqual([]);
  });
});

describe('hand-typed figures in the README', () => {
  test('figures read off a run are found; commands, flags and defaults in code are not', () => {
    const old = [
      'the cloud receives only the token ids it has not seen (26 bytes per routed step),',
      'On a 2-core machine the suites took about 10½ minutes before the chat pair (the first',
      '| fp32 / F32 | 55.3 (47.1), 47.5 (46.1) | 52.4 (44.1), 43.8 (42.7) | 1.07 (0.90–1.12) | 223, 226 ms | 548, 607 ms |',
      'fp32 decodes within a tenth of llama.cpp and routes 23.8% of tokens',
    ];
    expect(old.filter((line) => handTypedFigures(line).length === 0)).toEqual([]);
    const allowed = [
      '| `--max-concurrent`, `--max-batch` | 8, 8 | generations at once |',
      '```sh\nbun run bench latency --rtt-ms 170\n```',
      "The demo router's τ is 0.8.",
    ];
    expect(allowed.flatMap(handTypedFigures)).toEqual([]);
  });

  test('the README types no figure: it links docs/results.md', () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
    expect(handTypedFigures(readme)).toEqual([]);
    expect(readme).toContain('(docs/results.md#decode-speed-against-llamacpp)');
  });
});
