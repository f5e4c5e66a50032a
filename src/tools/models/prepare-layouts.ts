/**
 * The two ways `models prepare` makes an edge pack from a hub folder's ONNX files, each writing into a
 * folder that prepare.ts then moves into place whole:
 * - fused: `models optimize` rebuilds the fp32 file (the fp16 one when there is none) in the fused layout
 *   and, with a dtype, `models quantize` quantizes the result; the hub's own quantized files are plain
 *   graphs, slower than the fused ones, so they stay out;
 * - plain: every file the edge can run, as it comes, with hidden_states exposed (expose-hidden, once per
 *   file); files the edge refuses stay out, each with the edge's reason.
 */
import { readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { DEFAULT_MODEL_FILE } from '../../shared/model/model-pack.ts';
import { exposeHiddenStates, type ExposeHiddenResult } from './expose-hidden.ts';
import type { HubFolder } from './hub-folder.ts';
import { inspectModel } from './inspect-model.ts';
import { optimizeHubExport, type OptimizeResult } from './optimize.ts';
import { quantizePack, type QuantizedDtype, type QuantizeResult } from './quantize.ts';

export interface LeftOut {
  file: string;
  reason: string;
}

export interface FusedBuild {
  layout: 'fused';
  optimized: OptimizeResult;
  quantized?: QuantizeResult & { dtype: QuantizedDtype };
  leftOut: LeftOut[];
}

export interface PlainBuild {
  layout: 'plain';
  /** Why the fused layout was not built: optimize's refusal, or no fp32/fp16 file to rebuild. */
  whyNotFused: string;
  exposed: ExposeHiddenResult[];
  leftOut: LeftOut[];
  /** The file the edge is told to run: the dtype's hub file, else model.onnx, else the first of PLAIN_PREFERENCE. */
  runFile: string;
}

/** The files optimize can rebuild, best first (fp16 weights are widened to fp32, the same pack less exact). */
const FUSED_SOURCES = [DEFAULT_MODEL_FILE, 'model_fp16.onnx'];
/** The hub's names for its quantized variants (onnx-community, optimum). */
const HUB_FILES_BY_DTYPE: Record<QuantizedDtype, string[]> = { q4: ['model_q4.onnx'], int8: ['model_quantized.onnx', 'model_int8.onnx', 'model_uint8.onnx'] };
/** Which file a plain pack runs when no dtype names one: fp16 last, onnxruntime's CPU kernels for it are few. */
const PLAIN_PREFERENCE = [DEFAULT_MODEL_FILE, ...HUB_FILES_BY_DTYPE.q4, ...HUB_FILES_BY_DTYPE.int8];

/**
 * The fused pack in `dir`, or why there is none: optimize refuses (INVALID_ARGUMENT) what it does not know
 * how to rewrite, before it writes anything, and that refusal is what sends a download to the plain layout.
 */
export async function buildFused(hub: HubFolder, dir: string, dtype: QuantizedDtype | undefined): Promise<FusedBuild | { whyNotFused: string }> {
  const source = FUSED_SOURCES.find((f) => hub.onnxFiles.includes(f));
  if (!source) return { whyNotFused: `no ${FUSED_SOURCES.join(' or ')} to rebuild (only ${hub.onnxFiles.join(', ')})` };
  const optimizedDir = join(dir, '.optimized');
  let optimized: OptimizeResult;
  try {
    optimized = await optimizeHubExport({ input: join(hub.onnxDir!, source), output: optimizedDir });
  } catch (e) {
    if (e instanceof AppError && e.code === 'INVALID_ARGUMENT') return { whyNotFused: e.message };
    throw e;
  }
  let quantized: FusedBuild['quantized'];
  let built = optimizedDir;
  if (dtype) {
    built = join(dir, '.quantized');
    quantized = { dtype, ...(await quantizePack({ input: optimizedDir, output: built, dtype })) };
  }
  for (const f of readdirSync(built)) renameSync(join(built, f), join(dir, f));
  for (const staged of [optimizedDir, built]) rmSync(staged, { recursive: true, force: true });
  const replaced = `plain graphs; the fused ${DEFAULT_MODEL_FILE}, rebuilt from ${source}, runs instead${dtype ? '' : ' (--dtype q4|int8 quantizes it)'}`;
  const leftOut = hub.onnxFiles.filter((f) => f !== source).map((file) => ({ file, reason: replaced }));
  return { layout: 'fused', optimized, ...(quantized ? { quantized } : {}), leftOut };
}

/** The hub's files the edge can run, each with hidden_states, in `dir` (which already holds config.json). */
export async function buildPlain(hub: HubFolder, dir: string, dtype: QuantizedDtype | undefined, whyNotFused: string): Promise<PlainBuild> {
  const layers = hub.config.num_hidden_layers;
  const leftOut: LeftOut[] = [];
  const runnable: string[] = [];
  for (const file of hub.onnxFiles) {
    const reason = edgeRefusal(join(hub.onnxDir!, file), layers);
    if (reason) leftOut.push({ file, reason });
    else runnable.push(file);
  }
  if (!runnable.length) {
    throw new AppError('FAILED_PRECONDITION', `the edge runs none of ${hub.onnxDir}'s ONNX files: ${leftOut.map((l) => `${l.file}: ${l.reason}`).join('; ')}`);
  }
  const runFile = chooseRunFile(runnable, dtype, hub, whyNotFused);
  const exposed: ExposeHiddenResult[] = [];
  for (const file of runnable) exposed.push(await exposeInPack(join(hub.onnxDir!, file), dir));
  return { layout: 'plain', whyNotFused, exposed, leftOut, runFile };
}

/** Why the edge would refuse the file (its declared inputs and outputs, read as inspect does), or undefined. */
function edgeRefusal(path: string, configLayers: unknown): string | undefined {
  const { edge } = inspectModel(path);
  if ('refused' in edge) return edge.refused;
  const layers = edge.io.pastNames.length / 2;
  return layers === configLayers ? undefined : `its KV cache has ${layers} layers, config.json's num_hidden_layers is ${String(configLayers)}`;
}

function chooseRunFile(runnable: string[], dtype: QuantizedDtype | undefined, hub: HubFolder, whyNotFused: string): string {
  if (!dtype) return PLAIN_PREFERENCE.find((f) => runnable.includes(f)) ?? runnable[0]!;
  const named = HUB_FILES_BY_DTYPE[dtype];
  const found = named.find((f) => runnable.includes(f));
  if (found) return found;
  throw new AppError(
    'FAILED_PRECONDITION',
    `--dtype ${dtype}: the fused layout cannot be built (${whyNotFused}), and ${hub.onnxDir} has no ${named.join(' or ')} the edge can run; leave out --dtype to take the files as they come`,
  );
}

/** expose-hidden into the pack; a head it cannot find is found by hand, in the hub folder, with --node. */
async function exposeInPack(input: string, dir: string): Promise<ExposeHiddenResult> {
  try {
    return await exposeHiddenStates({ input, output: dir });
  } catch (e) {
    if (!(e instanceof AppError) || e.code !== 'FAILED_PRECONDITION') throw e;
    const advice = `expose it in the hub folder first (bun run models expose-hidden --in ${input} --out ${input} --node TENSOR --force), then prepare again`;
    throw new AppError(e.code, `${errorMessage(e)}; ${advice}`, { cause: e });
  }
}
