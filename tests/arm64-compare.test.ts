/**
 * The verdicts of scripts/check-arm64.sh's comparison (scripts/arm64/compare-reports.ts), on reports built
 * here: identical reports pass; a demo-pair id or a routed token that differs fails; packs pass within the
 * quantizer tests' tolerances and fail outside them. (The emulated run itself is the script, not a test:
 * it needs Debian's arm64 packages and minutes of qemu.)
 */
import { expect, test } from 'bun:test';
import { compareReports } from '../scripts/arm64/compare-reports.ts';
import type { PackMeasures, PlatformReport } from '../scripts/arm64/report-types.ts';

/** 100 teacher-forced argmaxes 0..99, perplexity `perplexity`, greedy ids 5..9. */
function pack(perplexity: number, changedArgmaxes = 0): PackMeasures {
  return { argmaxes: Array.from({ length: 100 }, (_, i) => (i < changedArgmaxes ? -1 : i)), perplexity, greedy: [5, 6, 7, 8, 9] };
}

function report(arch: string, overrides: Partial<PlatformReport> = {}): PlatformReport {
  return {
    arch,
    bun: '1.4.5',
    executionProviders: ['cpu'],
    smallOnly: { ids: [10, 11, 12], sources: ['slm', 'slm', 'slm'] },
    joint: { ids: [10, 20, 12], sources: ['slm', 'llm', 'slm'] },
    // Against fp32: int8 agrees on 96 of 100 and +0.7% perplexity; q4 on 81 and +12%.
    packs: { fp32: pack(4.0), int8: pack(4.028, 4), q4: pack(4.48, 19) },
    seconds: 1,
    ...overrides,
  };
}

const failures = (rows: ReturnType<typeof compareReports>) => rows.filter((r) => r.ok === false).map((r) => `${r.check}: ${r.detail}`);

test('identical reports pass every check', () => {
  const rows = compareReports(report('x64'), report('arm64'));
  expect(failures(rows)).toEqual([]);
  expect(rows.filter((r) => r.ok === true)).toHaveLength(11);
  expect(rows.find((r) => r.check === 'demo pair joint (shim over gRPC): same tokens routed to the shim')?.detail).toBe(
    '1 routed on x64, 1 on arm64; 0 fell back',
  );
});

test('a different demo-pair id or a token the edge kept instead of routing fails, naming where', () => {
  const other = report('arm64', {
    smallOnly: { ids: [10, 11, 13], sources: ['slm', 'slm', 'slm'] },
    joint: { ids: [10, 20, 12], sources: ['slm', 'fallback', 'slm'] },
  });
  expect(failures(compareReports(report('x64'), other))).toEqual([
    'demo pair small_only: greedy ids identical: differ from token 2: x64 12, arm64 13',
    'demo pair joint (shim over gRPC): same tokens routed to the shim: 1 routed on x64, 0 on arm64; 1 fell back',
  ]);
});

test('packs pass within the tolerances (94% agreement, 1.5% perplexity) and fail outside them', () => {
  const within = report('arm64', { packs: { fp32: pack(4.0), int8: pack(4.05, 5), q4: pack(4.5, 19) } });
  expect(failures(compareReports(report('x64'), within))).toEqual([]);
  const outside = report('arm64', { packs: { fp32: pack(4.0), int8: pack(4.1, 11), q4: pack(4.48, 19) } });
  expect(failures(compareReports(report('x64'), outside))).toEqual([
    'int8 pack: next-token argmaxes vs x64 ≥ 94%: 93.00% of 100',
    'int8 pack: perplexity vs x64 within 1.5%: x64 4.0280, arm64 4.1000',
    'int8 vs fp32 on arm64: agreement > 94%, perplexity < 1.015×: agreement 89.00%, perplexity ×1.0250',
  ]);
});
