/** `bun run models <command>`: build, convert, patch and inspect model packs. */
import { parseFlags, requireFlag, integerFlag, runSubcommands, UsageError } from '../cli-support.ts';
import { convertLlama2c } from './convert-llama2c.ts';
import { DECODER_LAYOUTS, type DecoderLayout } from './decoder-graph.ts';
import { DEFAULT_DECODE_ATTENTION, parseDecodeAttention, type DecodeAttention } from './decoder-graph-attention.ts';
import { CHAT_DEMO, DEMO, TRUNCATED_DEMO } from '../../shared/paths.ts';
import { progressFor } from '../lab/progress.ts';
import { buildAllDemoPacks, buildDemoPacks } from './demo.ts';
import { exposeHiddenStates, formatExposeResult } from './expose-hidden.ts';
import { formatInspection, inspectPath } from './inspect-model.ts';
import { formatOptimizeResult, optimizeHubExport } from './optimize.ts';
import { preparePack } from './prepare.ts';
import { formatPrepareResult } from './prepare-summary.ts';
import { writeRandomPack } from './random-pack.ts';
import { quantizePack, type QuantizedDtype } from './quantize.ts';

const USAGE = `usage: bun run models <command> [flags]

  convert-llama2c --checkpoint F --tokenizer F [--layers K] [--layout plain|fused [--decode-attention gqa|matmul]] [--chat-template F] --out DIR [--force]
      a llama2.c checkpoint → decoder pack; --layers keeps the first K layers (an edge model);
      --chat-template writes a Jinja file into the pack as its chat_template.jinja
  random --preset tiny-qwen2|qwen2.5-0.5b --out DIR [--seed S] [--head matmul|gemm] [--layout plain|fused [--decode-attention gqa|matmul]] [--no-hidden-states] [--force]
      a random-weight Qwen2-style pack with the real Qwen tokenizer; --layout fused writes onnxruntime's
      contrib ops (GroupQueryAttention over a preallocated KV buffer, SkipSimplifiedLayerNormalization);
      --decode-attention ${DEFAULT_DECODE_ATTENTION} (the default) attends with GroupQueryAttention at every run, matmul
      has decode steps attend with standard ops on the buffer in place: slower on short caches, faster from
      a few hundred cached positions (docs/model-packs.md)
  expose-hidden --in model.onnx|PACK --out model.onnx|FOLDER [--node TENSOR] [--force]
      add the hidden_states output (the LM head's input) to an existing export (fp32, fp16, q4 MatMulNBits,
      int8 MatMulInteger); a pack folder as --in means its model.onnx, a folder as --out keeps the file name
  quantize --in PACK --out PACK --dtype q4|int8 [--block-size 32] [--accuracy-level 4] [--embedding] [--force]
      MatMul weights (the LM head included) as symmetric block-wise MatMulNBits, 4-bit (q4) or 8-bit (int8)
      (accuracy_level 4 = int8 compute with activations quantized per row and block, 0 = fp32);
      --embedding (q4): the tied embedding's lookup reads the LM head's 4-bit blocks (GatherBlockQuantized)
  optimize --in HUB_FOLDER|model.onnx --out PACK [--layout fused|plain] [--decode-attention gqa|matmul] [--force]
      a Hugging Face hub export of a Llama/Qwen2 decoder (the plain graph of transformers' exporter or
      optimum, fp32 or fp16) rebuilt as a pack in the fused layout (default) with hidden_states: its
      weights are read from the graph and checked against config.json (beside the file or one folder up);
      fp16 weights are widened to float32; quantized exports are refused (optimize the fp32 export, then
      quantize); generation_config.json and tokenizer files are copied when the hub folder has them
  prepare HUB_FOLDER --out PACK [--dtype q4|int8] [--cloud-only] [--force]
      a hub download as it comes (onnx/ with any of model.onnx, model_fp16.onnx, model_q4.onnx,
      model_quantized.onnx; config, generation config, tokenizer files, chat template) → an edge pack:
      a decoder optimize knows is rebuilt fused (the fastest layout) from model.onnx and, with --dtype,
      quantized; any other keeps its files with hidden_states exposed in each. Missing files are named
      with where they come from. --cloud-only: the shim's pack for an HTTP backend (config and tokenizer
      files, no ONNX)
  inspect model.onnx|PACK
      inputs, outputs, op counts, candidate hidden-state tensors and how the edge would run the file
      (every .onnx file of a pack folder)
  demo [--pair all|chat|stories|truncated]
      build the demo pairs from ../shared/assets: the chat pair (what bun run start serves)
      models/stories260k-chat (cloud, 5 layers) and models/stories260k-chat-distilled-1l (edge, 1 layer),
      both chat-tuned with the pair's chat_template.jinja, and models/router-stories260k-chat-distilled-1l,
      trained on the first tenth of its training conversations; the story pair models/stories260k (cloud,
      5 layers), models/stories260k-distilled-1l (edge, the distilled 1-layer student) and its router
      models/router-stories260k-distilled-1l; and the truncated pair: models/stories260k-3l (the first
      3 layers, untrained) and models/router-stories260k-3l. The plain-text routers train on the first 80%
      of the TinyStories excerpt; a no-op when up to date. --pair builds one pair only (default all;
      demo is the story pair's earlier name)

  --out is a new or empty folder (a pack is written whole or not at all, created where its parent is
  missing); an existing one is refused unless --force and it is a folder these tools wrote (it holds
  written-by.json); a folder without it, a file, a link or a device is never replaced. A file output
  (expose-hidden) replaces only a regular file, with --force.`;

/** `--decode-attention` for `layout`: it chooses between the fused layout's attentions, so it needs that layout. */
function decodeAttentionFlag(value: string | undefined, layout: DecoderLayout): DecodeAttention | undefined {
  if (value !== undefined && layout !== 'fused') throw new UsageError('--decode-attention applies to --layout fused only');
  return layout === 'fused' ? parseDecodeAttention(value) : undefined;
}

function layoutFlag(value: string | undefined): DecoderLayout {
  const layout = value ?? 'plain';
  if (!(DECODER_LAYOUTS as readonly string[]).includes(layout)) throw new UsageError(`--layout must be ${DECODER_LAYOUTS.join(' or ')}, got ${layout}`);
  return layout as DecoderLayout;
}

async function convertCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    checkpoint: { type: 'string' },
    tokenizer: { type: 'string' },
    layers: { type: 'string' },
    layout: { type: 'string' },
    'decode-attention': { type: 'string' },
    'chat-template': { type: 'string' },
    out: { type: 'string' },
    force: { type: 'boolean' },
  });
  const out = requireFlag(values, 'out');
  const layout = layoutFlag(values.layout);
  await convertLlama2c({
    force: values.force === true,
    layout,
    decodeAttention: decodeAttentionFlag(values['decode-attention'], layout),
    checkpoint: requireFlag(values, 'checkpoint'),
    tokenizer: requireFlag(values, 'tokenizer'),
    layers: integerFlag(values, 'layers'),
    chatTemplate: values['chat-template'],
    out,
  });
  console.log(`wrote ${out}`);
}

async function randomCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    preset: { type: 'string' },
    out: { type: 'string' },
    seed: { type: 'string' },
    head: { type: 'string' },
    layout: { type: 'string' },
    'decode-attention': { type: 'string' },
    'no-hidden-states': { type: 'boolean' },
    force: { type: 'boolean' },
  });
  const head = values.head ?? 'default';
  if (!['matmul', 'gemm', 'default'].includes(head)) throw new UsageError(`--head must be matmul or gemm, got ${head}`);
  const out = requireFlag(values, 'out');
  const layout = layoutFlag(values.layout);
  await writeRandomPack({
    preset: requireFlag(values, 'preset'),
    out,
    seed: integerFlag(values, 'seed', 0)!,
    head: head === 'default' ? undefined : (head as 'matmul' | 'gemm'),
    hiddenStatesOutput: !values['no-hidden-states'],
    layout,
    decodeAttention: decodeAttentionFlag(values['decode-attention'], layout),
    force: values.force === true,
  });
  console.log(`wrote ${out}`);
}

async function exposeHiddenCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, { in: { type: 'string' }, out: { type: 'string' }, node: { type: 'string' }, force: { type: 'boolean' } });
  const result = await exposeHiddenStates({
    input: requireFlag(values, 'in'),
    output: requireFlag(values, 'out'),
    node: values.node,
    force: values.force === true,
  });
  console.log(formatExposeResult(result));
}

async function quantizeCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    in: { type: 'string' },
    out: { type: 'string' },
    dtype: { type: 'string' },
    'block-size': { type: 'string' },
    'accuracy-level': { type: 'string' },
    embedding: { type: 'boolean' },
    force: { type: 'boolean' },
  });
  const dtype = requireFlag(values, 'dtype');
  if (dtype !== 'q4' && dtype !== 'int8') throw new UsageError(`--dtype must be q4 or int8, got ${dtype}`);
  const out = requireFlag(values, 'out');
  const r = await quantizePack({
    input: requireFlag(values, 'in'),
    output: out,
    dtype: dtype as QuantizedDtype,
    blockSize: integerFlag(values, 'block-size', 32),
    accuracyLevel: integerFlag(values, 'accuracy-level', 4, [0, 4]),
    embedding: values.embedding === true,
    force: values.force === true,
  });
  console.log(`wrote ${out}: ${r.quantized} MatMul(s) as ${dtype}, ${(r.weightBytes / 2 ** 20).toFixed(1)} MiB of weights`);
}

async function optimizeCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    in: { type: 'string' },
    out: { type: 'string' },
    layout: { type: 'string' },
    'decode-attention': { type: 'string' },
    force: { type: 'boolean' },
  });
  const out = requireFlag(values, 'out');
  const layout = values.layout === undefined ? 'fused' : layoutFlag(values.layout);
  const result = await optimizeHubExport({
    input: requireFlag(values, 'in'),
    output: out,
    layout,
    decodeAttention: decodeAttentionFlag(values['decode-attention'], layout),
    force: values.force === true,
  });
  console.log(formatOptimizeResult(result, out));
}

async function prepareCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    out: { type: 'string' },
    dtype: { type: 'string' },
    'cloud-only': { type: 'boolean' },
    force: { type: 'boolean' },
  });
  if (positionals.length !== 1) throw new UsageError('prepare takes exactly one hub folder');
  const dtype = values.dtype;
  if (dtype !== undefined && dtype !== 'q4' && dtype !== 'int8') throw new UsageError(`--dtype must be q4 or int8, got ${dtype}`);
  const result = await preparePack({
    input: positionals[0]!,
    output: requireFlag(values, 'out'),
    dtype,
    cloudOnly: values['cloud-only'] === true,
    force: values.force === true,
  });
  console.log(formatPrepareResult(result));
}

async function inspectCommand(args: string[]): Promise<void> {
  const { positionals } = parseFlags(args, {});
  if (positionals.length !== 1) throw new UsageError('inspect takes exactly one model file or pack folder');
  console.log(inspectPath(positionals[0]!).map(formatInspection).join('\n\n'));
}

async function demoCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, { pair: { type: 'string', default: 'all' } });
  const log = (line: string) => console.log(line);
  // A bar on a terminal, a line every few seconds in a log: the router's training takes a while.
  const progress = progressFor(process.stderr);
  const pairs: Record<string, () => Promise<string[]>> = {
    all: () => buildAllDemoPacks(log, progress),
    chat: () => buildDemoPacks(CHAT_DEMO, log, progress),
    stories: () => buildDemoPacks(DEMO, log, progress),
    demo: () => buildDemoPacks(DEMO, log, progress),
    truncated: () => buildDemoPacks(TRUNCATED_DEMO, log, progress),
  };
  const build = Object.hasOwn(pairs, values.pair!) ? pairs[values.pair!]! : undefined;
  if (!build) throw new UsageError(`--pair must be one of all, chat, stories, truncated, got ${JSON.stringify(values.pair)}`);
  const built = await build();
  console.log(built.length ? `built ${built.length} pack(s)` : 'demo packs up to date');
}

await runSubcommands(
  {
    'convert-llama2c': convertCommand,
    random: randomCommand,
    'expose-hidden': exposeHiddenCommand,
    quantize: quantizeCommand,
    optimize: optimizeCommand,
    prepare: prepareCommand,
    inspect: inspectCommand,
    demo: demoCommand,
  },
  USAGE,
);
