/**
 * The files of a hub download, checked before any of them is read (hub-folder.ts): each must be a regular
 * file inside the hub folder (a link may point elsewhere in it, or into the blobs of the Hugging Face
 * cache the folder is a snapshot of, as `huggingface-cli download` lays it out; never out of it), and no
 * larger than what it can be. A link to /etc/passwd or /dev/zero, a FIFO or a device is refused by name,
 * so nothing outside the download is copied into a pack and nothing without an end is read.
 *
 * @example
 * const roots = hubRoots('/data/hub/models--Qwen--Qwen2.5-0.5B/snapshots/abc');  // the snapshot, and ../../blobs
 * checkHubFile(join(dir, 'tokenizer.json'), roots, MAX_METADATA_BYTES);
 */
import { existsSync, lstatSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, sep } from 'node:path';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { kindOf } from './output-ownership.ts';

/** Config, tokenizer files, chat template: the largest tokenizers (vocabularies of 256k tokens) are tens of MiB. */
export const MAX_METADATA_BYTES = 256 * 2 ** 20;
/** protobuf's limit: no .onnx file is larger (weights beyond it live in external data files). */
export const MAX_ONNX_BYTES = 2 ** 31;

/** The folders links of a hub folder may lead into: the folder itself and, for a cache snapshot, its repository's blobs. */
export function hubRoots(dir: string): string[] {
  const real = realpathSync(dir);
  const roots = [real];
  const repository = dirname(dirname(real));
  if (basename(dirname(real)) === 'snapshots' && existsSync(join(repository, 'blobs'))) roots.push(realpathSync(join(repository, 'blobs')));
  return roots;
}

const inside = (path: string, root: string) => path === root || path.startsWith(`${root}${sep}`);

/** Whether something (a dangling link included) is at `path`. */
export function present(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Refuses `path` unless it is a regular file (after links) inside `roots` and at most `maxBytes` long;
 * returns its size.
 */
export function checkHubFile(path: string, roots: readonly string[], maxBytes: number, why = 'more than such a file can be'): number {
  let real: string;
  try {
    real = realpathSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot be resolved (${errorMessage(e)}); a link in a hub folder must lead to a file inside it`);
  }
  if (!roots.some((root) => inside(real, root))) {
    throw new AppError(
      'PERMISSION_DENIED',
      `${path} is a link to ${real}, outside the hub folder ${roots[0]}: prepare reads only files inside it; copy the file into the folder if it belongs to the model`,
    );
  }
  const stats = statSync(real);
  if (!stats.isFile()) throw new AppError('INVALID_ARGUMENT', `${path} is ${kindOf(lstatSync(real))}, not a regular file: prepare reads regular files only`);
  if (stats.size > maxBytes) {
    throw new AppError('INVALID_ARGUMENT', `${path} is ${stats.size} bytes, ${why} (at most ${maxBytes}): not a file of this model`);
  }
  return stats.size;
}

/**
 * The most bytes of weights a decoder of `config` can have: every parameter in float32, key and value
 * projections as wide as the query's, an LM head of its own, with a quarter more for what a graph adds
 * (cos/sin caches, quantization scales). Undefined when config.json does not give the sizes.
 */
export function weightBytesBound(config: Record<string, unknown>): number | undefined {
  const sizes = ['vocab_size', 'hidden_size', 'num_hidden_layers', 'intermediate_size'].map((k) => config[k]);
  if (!sizes.every((v) => Number.isInteger(v) && (v as number) > 0)) return undefined;
  const [vocab, hidden, layers, intermediate] = sizes as number[];
  const perLayer = 4 * hidden! * hidden! + 3 * hidden! * intermediate! + 4 * hidden!;
  const parameters = layers! * perLayer + 2 * vocab! * hidden! + hidden!;
  return Math.ceil(parameters * 4 * 1.25) + 64 * 2 ** 20;
}
