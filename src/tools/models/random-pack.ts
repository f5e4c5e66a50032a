/** `models random`: a random-weight pack of a preset architecture, with the real Qwen tokenizer. */
import { join } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { MODELS_DIR } from '../../shared/paths.ts';
import type { DecoderLayout } from './decoder-graph.ts';
import { decodeAttentionSource, type DecodeAttention } from './decoder-graph-attention.ts';
import { parameterCount } from './decoder-spec.ts';
import { packIsUpToDate, writeDecoderPack } from './pack-writer.ts';
import { PRESETS, qwenTokenizerFiles, randomWeights } from './random-model.ts';

export interface RandomPackOptions {
  preset: string;
  out: string;
  seed: number;
  /** Defaults to `gemm` (the tied embedding stored once); `matmul` with `untiedHead`. */
  head?: 'matmul' | 'gemm';
  /**
   * An LM head of its own (random like the rest) instead of the preset's tied embedding. Tiny random
   * models with a tied head echo their input token, so two of them always agree on the top-1; two with
   * heads of their own (different seeds) disagree about as often as they agree, which is what a test of
   * router training needs to see both labels.
   */
  untiedHead?: boolean;
  hiddenStatesOutput: boolean;
  /** The graph's layout (decoder-graph.ts); `plain` when omitted. */
  layout?: DecoderLayout;
  /** Fused layout: how decode steps attend (DecoderGraphOptions); the default when omitted. */
  decodeAttention?: DecodeAttention;
  /** Fused layout: false builds the older graph without `new_key_values.*` (tests of that path). */
  newKeyValuesOutputs?: boolean;
  /** Replace a pack this project's tools wrote at `out` (output-ownership.ts). */
  force?: boolean;
}

/** Above this many bytes of weights a pack keeps them in `model.onnx_data`. */
const EXTERNAL_DATA_ABOVE_BYTES = 256 * 1024 * 1024;

export async function writeRandomPack(options: RandomPackOptions): Promise<void> {
  const preset = PRESETS[options.preset];
  if (!preset) {
    throw new AppError('INVALID_ARGUMENT', `unknown preset ${options.preset} (known: ${Object.keys(PRESETS).join(', ')})`);
  }
  if (options.untiedHead && options.head === 'gemm')
    throw new AppError('INVALID_ARGUMENT', 'the gemm head is the tied embedding; an untied head is a matmul head');
  const spec = options.untiedHead ? { ...preset, tieEmbeddings: false } : preset;
  const { tokenizerJson, tokenizerConfig } = qwenTokenizerFiles();
  await writeDecoderPack(
    options.out,
    {
      spec,
      weights: randomWeights(spec, options.seed),
      graph: {
        head: options.head ?? (options.untiedHead ? 'matmul' : 'gemm'),
        hiddenStatesOutput: options.hiddenStatesOutput,
        layout: options.layout ?? 'plain',
        decodeAttention: options.decodeAttention,
        newKeyValuesOutputs: options.newKeyValuesOutputs,
      },
      tokenizerJson,
      tokenizerConfig,
      externalData: parameterCount(spec) * 4 > EXTERNAL_DATA_ABOVE_BYTES,
      source: {
        ...randomPackSource(options.preset, options.seed, options.layout, options.decodeAttention),
        ...(options.untiedHead ? { untiedHead: true } : {}),
      },
    },
    { tool: 'models random', force: options.force },
  );
}

/**
 * The graphs a benchmark builds a preset in: the two layouts, and `fused-matmul`, the fused layout with
 * decode steps through standard ops (`--decode-attention matmul`, decoder-graph-attention.ts).
 */
export type BenchLayout = DecoderLayout | 'fused-matmul';
export const BENCH_LAYOUTS: readonly BenchLayout[] = ['plain', 'fused', 'fused-matmul'];

function benchGraph(layout: BenchLayout): { layout: DecoderLayout; decodeAttention?: DecodeAttention } {
  return layout === 'fused-matmul' ? { layout: 'fused', decodeAttention: 'matmul' } : { layout };
}

/**
 * The benchmarks' random-weight pack of `preset` (seed 0, with hidden_states) under models/bench/
 * (`<preset>-<layout>` for the fused ones), built on first use and reused while its recorded source
 * matches; returns its folder.
 */
export async function ensureBenchPack(preset: string, log: (line: string) => void, layout: BenchLayout = 'plain'): Promise<string> {
  const dir = join(MODELS_DIR, 'bench', layout === 'plain' ? preset : `${preset}-${layout}`);
  if (!packIsUpToDate(dir, benchPackSource(preset, layout))) {
    log(`building ${dir} (random weights, once)`);
    await writeRandomPack({ preset, out: dir, seed: 0, hiddenStatesOutput: true, ...benchGraph(layout), force: true });
  }
  return dir;
}

/**
 * What writeRandomPack records in pack-source.json, and what a bench pack must match to be reused.
 * graph 2: the LM head on the last num_logits_to_keep positions only; graph 3 (fused only): the
 * new_key_values.* outputs; `decodeAttention: 'matmul'` (fused only, recorded
 * when chosen): decode steps attend with standard ops (decoder-graph-attention.ts).
 */
function randomPackSource(preset: string, seed: number, layout: DecoderLayout = 'plain', decodeAttention?: DecodeAttention): Record<string, unknown> {
  return {
    tool: 'random',
    preset,
    seed,
    graph: layout === 'fused' ? 3 : 2,
    ...(layout === 'plain' ? {} : { layout }),
    ...decodeAttentionSource(layout, decodeAttention),
  };
}

/** What writeRandomPack records for a bench pack (seed 0). */
export function benchPackSource(preset: string, layout: BenchLayout = 'plain'): Record<string, unknown> {
  const graph = benchGraph(layout);
  return randomPackSource(preset, 0, graph.layout, graph.decodeAttention);
}
