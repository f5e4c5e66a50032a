/**
 * `bench decode --profile`: decode steps run under onnxruntime's profiler, read back into time per op
 * type, nodes per step, the share outside the matrix products and the KV bytes copied per step
 * (decode-profile-summary.ts). The profile file is written to a temporary folder and removed after.
 *
 * @example
 * const summary = await profileDecode({ dir: 'models/bench/qwen2.5-0.5b', promptTokens: 100, steps: 16, threads: 2, log: console.error });
 * console.log(formatDecodeProfile(summary));
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { argmax } from '../../shared/model/logits.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { integerFlag, UsageError } from '../cli-support.ts';
import { BENCH_LAYOUTS, type BenchLayout } from '../models/random-pack.ts';
import { ensureDtypePack, parseDtypes } from './decode-packs.ts';
import { promptIds, resolvePack } from './decode-target.ts';
import { type DecodeProfileSummary, formatDecodeProfile, type ProfileEvent, summarizeDecodeProfile } from './decode-profile-summary.ts';

export interface DecodeProfileOptions {
  dir: string;
  promptTokens: number;
  /** Decode steps profiled, after one untimed step that lets onnxruntime settle its allocations. */
  steps: number;
  threads: number;
  log: (line: string) => void;
}

export async function profileDecode(o: DecodeProfileOptions): Promise<DecodeProfileSummary> {
  const pack = loadModelPack(o.dir);
  if (o.promptTokens + o.steps + 1 > pack.maxPositions) {
    throw new AppError('INVALID_ARGUMENT', `prompt + steps exceed the model's ${pack.maxPositions} positions`);
  }
  const ids = await promptIds(pack, o.promptTokens);
  const folder = mkdtempSync(join(tmpdir(), 'decode-profile-'));
  try {
    o.log(`profiling ${o.steps} decode steps of ${o.dir} after a ${o.promptTokens}-token prefill, ${o.threads} threads`);
    const model = await DecoderModel.load(pack, { threads: o.threads, profileFilePrefix: join(folder, 'decode') });
    const sequence = model.newSequence();
    let outputBytes = 0;
    try {
      let { logits } = await sequence.append(ids);
      ({ logits } = await sequence.append([argmax(logits)]));
      const before = model.stats.outputBytes;
      for (let i = 0; i < o.steps; i++) ({ logits } = await sequence.append([argmax(logits)]));
      outputBytes = (model.stats.outputBytes - before) / o.steps;
    } finally {
      sequence.dispose();
      model.endProfiling();
      await model.release();
    }
    const file = readdirSync(folder).find((f) => f.endsWith('.json'));
    if (!file) throw new AppError('INTERNAL', `onnxruntime wrote no profile into ${folder}`);
    const events = JSON.parse(readFileSync(join(folder, file), 'utf8')) as ProfileEvent[];
    // The profiled steps start after the prompt and the untimed step.
    const summary = summarizeDecodeProfile(
      events,
      Array.from({ length: o.steps }, (_, i) => o.promptTokens + 1 + i),
    );
    return { ...summary, perStep: { ...summary.perStep, outputBytes } };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** The summary as `--json` prints it (snake_case). */
export function decodeProfileJson(s: DecodeProfileSummary): Record<string, unknown> {
  return {
    steps: s.steps,
    nodes_per_step: s.perStep.nodes,
    run_us: s.perStep.runUs,
    kernel_us: s.perStep.kernelUs,
    matrix_us: s.perStep.matrixUs,
    kv_copy_bytes: s.perStep.kvCopyBytes,
    output_bytes: s.perStep.outputBytes ?? null,
    non_matrix_share: s.nonMatrixShare,
    between_kernels_share: s.betweenKernelsShare,
    by_op_type: s.byOpType.map((o) => ({ op: o.op, nodes: o.nodes, us: o.us })),
  };
}

/** A benchmark's `--layout`: plain, fused, or fused-matmul (fused with `--decode-attention matmul`). */
export function parseLayout(value: string): BenchLayout {
  if (!(BENCH_LAYOUTS as readonly string[]).includes(value)) throw new UsageError(`--layout must be ${BENCH_LAYOUTS.join(', ')}, got ${value}`);
  return value as BenchLayout;
}

/** `--profile`: one pack (--pack, or the preset), or each --dtype pack of the preset in turn. */
export async function profileCommand(values: Record<string, string | boolean | undefined>, threads: number, layout: BenchLayout | undefined): Promise<void> {
  if (values.peer !== undefined) throw new UsageError('--profile does not run llama.cpp');
  const steps = integerFlag(values, 'steps', 16)!;
  const promptTokens = integerFlag(values, 'prompt-tokens', 100)!;
  if (steps < 1 || promptTokens < 1 || threads < 1) throw new UsageError('--steps, --prompt-tokens and --threads must be at least 1');
  const log = (line: string) => console.error(line);
  const preset = values.preset as string | undefined;
  let packs: [string, string][];
  if (typeof values.dtype === 'string') {
    if (values.pack) throw new UsageError('--dtype works on a --preset (its quantized packs are built under models/bench/)');
    packs = [];
    for (const dtype of parseDtypes(values.dtype)) packs.push([dtype, await ensureDtypePack(preset ?? 'qwen2.5-0.5b', dtype, log, layout)]);
  } else {
    packs = [['pack', (await resolvePack({ preset, pack: values.pack as string | undefined, layout, log })).dir]];
  }
  for (const [label, dir] of packs) {
    const summary = await profileDecode({ dir, promptTokens, steps, threads, log });
    console.log(formatDecodeProfile(summary));
    if (values.json)
      console.log(
        JSON.stringify({ ...(label === 'pack' ? {} : { dtype: label }), pack: dir, threads, prompt_tokens: promptTokens, ...decodeProfileJson(summary) }),
      );
  }
}
