/**
 * Compares what another architecture computed (platform-report.ts under the arm64 Bun) with the x86-64
 * reference from the same run. The demo pair must decode the very same greedy ids (and, in joint, route the
 * same tokens); the packs must agree within the tolerances tests/quantize.test.ts puts on quantization
 * (next-token agreement above 94%, perplexity within 1.5%), both against x86-64 and, on the other
 * architecture itself, int8 and q4 against fp32. Greedy ids of the packs are shown, not required: one
 * near-tie settled differently by a kernel changes every token after it.
 *
 * @example
 * bun scripts/arm64/compare-reports.ts report-x64.json report-arm64.json // exits 1 on a mismatch
 */
import { readFileSync } from 'node:fs';
import type { DecodedRun, PackMeasures, PlatformReport } from './report-types.ts';

export interface CheckRow {
  check: string;
  /** undefined: shown for information, neither passes nor fails. */
  ok: boolean | undefined;
  detail: string;
}

/** tests/quantize.test.ts: int8 keeps agreement > 0.94 and perplexity within 1.5% of fp32; q4 agreement > 0.6, perplexity < 2× fp32. */
export const QUANTIZED_TOLERANCES = {
  int8: { minAgreement: 0.94, maxPerplexityRatio: 1.015 },
  q4: { minAgreement: 0.6, maxPerplexityRatio: 2 },
} as const;
/** Between two CPUs running the same file, the tighter of the two (int8's). */
const CROSS_CPU = { minAgreement: 0.94, maxPerplexityChange: 0.015 } as const;

function agreement(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length || a.length === 0) return 0;
  return a.filter((t, i) => t === b[i]).length / a.length;
}

/** Index of the first differing token, or -1 when the two are identical. */
function firstDifference(a: readonly (number | string)[], b: readonly (number | string)[]): number {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return -1;
}

function sameRun(name: string, reference: DecodedRun, other: DecodedRun, arch: string): CheckRow[] {
  const idsAt = firstDifference(reference.ids, other.ids);
  const sourcesAt = firstDifference(reference.sources, other.sources);
  const routed = (run: DecodedRun) => run.sources.filter((s) => s === 'llm').length;
  const rows: CheckRow[] = [
    {
      check: `${name}: greedy ids identical`,
      ok: idsAt === -1 && reference.ids.length > 0,
      detail: idsAt === -1 ? `${reference.ids.length} tokens` : `differ from token ${idsAt}: x64 ${reference.ids[idsAt]}, ${arch} ${other.ids[idsAt]}`,
    },
  ];
  if (reference.sources.some((s) => s !== 'slm')) {
    rows.push({
      check: `${name}: same tokens routed to the shim`,
      ok: sourcesAt === -1 && routed(other) > 0 && !other.sources.includes('fallback'),
      detail: `${routed(reference)} routed on x64, ${routed(other)} on ${arch}; ${other.sources.filter((s) => s === 'fallback').length} fell back`,
    });
  }
  return rows;
}

function samePack(name: string, reference: PackMeasures, other: PackMeasures, arch: string): CheckRow[] {
  const agree = agreement(reference.argmaxes, other.argmaxes);
  const change = Math.abs(other.perplexity / reference.perplexity - 1);
  const greedyAt = firstDifference(reference.greedy, other.greedy);
  return [
    {
      check: `${name}: next-token argmaxes vs x64 ≥ ${CROSS_CPU.minAgreement * 100}%`,
      ok: agree >= CROSS_CPU.minAgreement,
      detail: `${(agree * 100).toFixed(2)}% of ${reference.argmaxes.length}`,
    },
    {
      check: `${name}: perplexity vs x64 within ${CROSS_CPU.maxPerplexityChange * 100}%`,
      ok: change <= CROSS_CPU.maxPerplexityChange,
      detail: `x64 ${reference.perplexity.toFixed(4)}, ${arch} ${other.perplexity.toFixed(4)}`,
    },
    {
      check: `${name}: greedy ids vs x64`,
      ok: undefined,
      detail: greedyAt === -1 ? `identical (${other.greedy.length} tokens)` : `differ from token ${greedyAt}`,
    },
  ];
}

function quantizedAgainstFp32(report: PlatformReport, dtype: 'int8' | 'q4'): CheckRow {
  const { minAgreement, maxPerplexityRatio } = QUANTIZED_TOLERANCES[dtype];
  const agree = agreement(report.packs.fp32.argmaxes, report.packs[dtype].argmaxes);
  const ratio = report.packs[dtype].perplexity / report.packs.fp32.perplexity;
  return {
    check: `${dtype} vs fp32 on ${report.arch}: agreement > ${minAgreement * 100}%, perplexity < ${maxPerplexityRatio}×`,
    ok: agree > minAgreement && ratio < maxPerplexityRatio && ratio > 1 / maxPerplexityRatio,
    detail: `agreement ${(agree * 100).toFixed(2)}%, perplexity ×${ratio.toFixed(4)}`,
  };
}

/** Every check, in the order the summary prints them. */
export function compareReports(reference: PlatformReport, other: PlatformReport): CheckRow[] {
  return [
    {
      check: `execution providers on ${other.arch}`,
      ok: undefined,
      detail: `${other.executionProviders.join(', ')} (${reference.arch}: ${reference.executionProviders.join(', ')})`,
    },
    ...sameRun('demo pair small_only', reference.smallOnly, other.smallOnly, other.arch),
    ...sameRun('demo pair joint (shim over gRPC)', reference.joint, other.joint, other.arch),
    ...(['fp32', 'int8', 'q4'] as const).flatMap((dtype) => samePack(`${dtype} pack`, reference.packs[dtype], other.packs[dtype], other.arch)),
    quantizedAgainstFp32(other, 'int8'),
    quantizedAgainstFp32(other, 'q4'),
  ];
}

if (import.meta.main) {
  const [referencePath, otherPath] = process.argv.slice(2);
  if (!referencePath || !otherPath) {
    console.error('usage: bun scripts/arm64/compare-reports.ts REFERENCE.json OTHER.json');
    process.exit(2);
  }
  const read = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as PlatformReport;
  const [reference, other] = [read(referencePath), read(otherPath)];
  const rows = compareReports(reference, other);
  for (const row of rows) console.log(`${row.ok === undefined ? 'info' : row.ok ? 'ok  ' : 'FAIL'}  ${row.check}: ${row.detail}`);
  const failed = rows.filter((r) => r.ok === false).length;
  console.log(failed === 0 ? `${other.arch} agrees with ${reference.arch} on every check` : `${failed} check(s) failed on ${other.arch}`);
  process.exit(failed === 0 ? 0 : 1);
}
