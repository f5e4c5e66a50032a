/**
 * The benchmarks' packs per weight type: fp32 is the random-weight preset pack (random-pack.ts), q4 and
 * int8 are made from it by `models quantize` under models/bench/<preset>-<dtype> (<preset>-fused-<dtype>
 * for the fused layout), once, and reused while their recorded source matches.
 */
import { join } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { MODELS_DIR } from '../../shared/paths.ts';
import { packIsUpToDate } from '../models/pack-writer.ts';
import { QUANTIZED_DTYPES, quantizePack, type QuantizedDtype } from '../models/quantize.ts';
import { benchPackSource, ensureBenchPack, type BenchLayout } from '../models/random-pack.ts';

export type BenchDtype = 'fp32' | QuantizedDtype;
export const BENCH_DTYPES: readonly BenchDtype[] = ['fp32', ...QUANTIZED_DTYPES];

export function parseDtypes(list: string): BenchDtype[] {
  const dtypes = list.split(',').map((d) => d.trim());
  for (const d of dtypes) {
    if (!BENCH_DTYPES.includes(d as BenchDtype))
      throw new AppError('INVALID_ARGUMENT', `--dtype: unknown ${JSON.stringify(d)} (known: ${BENCH_DTYPES.join(', ')})`);
  }
  if (new Set(dtypes).size !== dtypes.length) throw new AppError('INVALID_ARGUMENT', `--dtype lists a type twice: ${list}`);
  return dtypes as BenchDtype[];
}

export async function ensureDtypePack(preset: string, dtype: BenchDtype, log: (line: string) => void, layout: BenchLayout = 'plain'): Promise<string> {
  const fp32 = await ensureBenchPack(preset, log, layout);
  if (dtype === 'fp32') return fp32;
  const dir = join(MODELS_DIR, 'bench', layout === 'plain' ? `${preset}-${dtype}` : `${preset}-${layout}-${dtype}`);
  // What quantizePack records in pack-source.json for the defaults used here.
  // int8 packs recorded as `{ dtype }` alone were DynamicQuantizeLinear + MatMulInteger: they no longer match, so are rebuilt.
  const quantization = { dtype, blockSize: 32, accuracyLevel: 4 };
  if (!packIsUpToDate(dir, { tool: 'quantize', ...quantization, from: benchPackSource(preset, layout) })) {
    log(`quantizing ${fp32} → ${dir} (${dtype}, once)`);
    // A stale pack here is one the benchmarks wrote (its marker says so): rebuilt in place.
    await quantizePack({ input: fp32, output: dir, dtype, force: true });
  }
  return dir;
}
