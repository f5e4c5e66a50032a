/**
 * `bench decode --dtype fp32,int8,q4`: the same decode benchmark for each weight type of one preset,
 * each in a child process of its own so that its peak RSS is the model's alone. The parent measures the
 * copy bandwidth once (before any model is loaded) and hands it to every child, so all bounds share it.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { percentile } from '../../shared/statistics.ts';
import { AppError } from '../../shared/errors.ts';
import { copyBuffers, CopyTeam, singleThreadCopyBandwidth } from './decode-bandwidth.ts';
import { type BenchDtype, ensureDtypePack } from './decode-packs.ts';
import type { BenchLayout } from '../models/random-pack.ts';

export interface DtypeRunOptions {
  preset: string;
  /** The preset's graph layout; `plain` when omitted. */
  layout?: BenchLayout;
  dtypes: BenchDtype[];
  /** Flags passed on to each child (prompt tokens, steps, warm-up, rounds, threads). */
  childArgs: string[];
  threads: number;
  copyBytes: number;
  log: (line: string) => void;
}

/** One child's `--json` line, with the weight type it ran. */
export type DtypeResult = Record<string, unknown> & { dtype: BenchDtype; ms_per_token: number; peak_rss_mb: number };

export async function measureBandwidth(copyBytes: number, threads: number): Promise<number> {
  const buffers = copyBuffers(copyBytes);
  const team = await CopyTeam.start(threads, copyBytes / threads);
  try {
    const single: number[] = [];
    const all: number[] = [];
    for (let i = 0; i < 3; i++) {
      single.push(singleThreadCopyBandwidth(buffers, 3));
      all.push(threads > 1 ? await team.measure(600) : single.at(-1)!);
    }
    return Math.max(percentile(single, 50), percentile(all, 50));
  } finally {
    team.close();
  }
}

export async function runDtypes(o: DtypeRunOptions): Promise<DtypeResult[]> {
  const packs: [BenchDtype, string][] = [];
  for (const dtype of o.dtypes) packs.push([dtype, await ensureDtypePack(o.preset, dtype, o.log, o.layout)]);
  const bandwidth = await measureBandwidth(o.copyBytes, o.threads);
  o.log(`copy bandwidth ${bandwidth.toFixed(1)} GB/s (read + written), used for every type's bound`);
  const results: DtypeResult[] = [];
  for (const [dtype, dir] of packs) {
    o.log(`${dtype}: ${dir} in a child process`);
    const line = await runChild(
      [join(import.meta.dir, 'cli.ts'), 'decode', '--pack', dir, '--bandwidth-gb-s', String(bandwidth), '--json', ...o.childArgs],
      o.log,
    );
    results.push({ ...(JSON.parse(line) as Omit<DtypeResult, 'dtype'>), dtype } as DtypeResult);
  }
  return results;
}

/** Runs the benchmark in a child process and returns its last stdout line (the JSON). */
function runChild(args: string[], log: (line: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) =>
      d
        .split('\n')
        .filter(Boolean)
        .forEach((l) => log(`  ${l}`)),
    );
    child.on('error', reject);
    child.on('close', (code) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !last.startsWith('{'))
        reject(new AppError('INTERNAL', `decode benchmark child exited with ${code}: ${out.trim().split('\n').at(-1) ?? ''}`));
      else resolve(last);
    });
  });
}

export function formatDtypeResults(results: readonly DtypeResult[]): string {
  const num = (v: unknown, digits: number) => (typeof v === 'number' ? v.toFixed(digits) : '-');
  const header = 'dtype  ms/token  p90     fastest  tok/s  weights MiB/token  bound ms  of bound  prefill ms  peak RSS MiB';
  const rows = results.map((r) =>
    [
      r.dtype.padEnd(5),
      num(r.ms_per_token, 1).padStart(9),
      num(r.ms_per_token_p90, 1).padStart(6),
      num(r.min_ms_per_token, 1).padStart(8),
      num(r.tokens_per_second, 1).padStart(8),
      num(Number(r.weight_bytes) / 2 ** 20, 1).padStart(18),
      num(r.bound_ms_per_token, 1).padStart(9),
      num(r.fraction_of_bound, 2).padStart(9),
      num(r.prefill_ms, 0).padStart(11),
      num(r.peak_rss_mb, 0).padStart(13),
    ].join(' '),
  );
  return [header, ...rows].join('\n');
}
