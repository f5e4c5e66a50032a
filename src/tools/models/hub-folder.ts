/**
 * A Hugging Face hub download as `models prepare` takes it, found and checked before anything is written:
 * config.json, tokenizer.json and tokenizer_config.json at the top, and the ONNX files in `onnx/` (the
 * hub's layout) or at the top (a pack-like folder). Every problem found is named in one error together
 * with where the missing file comes from, so a download that cannot become a pack fails here, at once,
 * and not when the edge first turns text into ids. Before any file is read, each is checked to be a
 * regular file inside the folder, of a size it can have (hub-files.ts).
 *
 * @example
 * const hub = await readHubFolder('downloads/Qwen2.5-0.5B-Instruct', { needOnnx: true });
 * hub.onnxFiles; // ['model.onnx', 'model_fp16.onnx', 'model_q4.onnx', 'model_quantized.onnx']
 */
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { DEFAULT_MODEL_FILE, modelFiles, readJsonFile } from '../../shared/model/model-pack.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { checkHubFile, hubRoots, MAX_METADATA_BYTES, MAX_ONNX_BYTES, present, weightBytesBound } from './hub-files.ts';
import { HUB_METADATA_FILES } from './optimize.ts';

export interface HubFolder {
  dir: string;
  /** Where the ONNX files are (`dir/onnx` or `dir`); undefined when there are none (a cloud-only download). */
  onnxDir: string | undefined;
  /** File names in `onnxDir`, model.onnx first, then alphabetically. */
  onnxFiles: string[];
  config: Record<string, unknown>;
  /** The files of HUB_METADATA_FILES the folder has (generation config, tokenizer files, chat template). */
  metadata: string[];
  /** The folder's tokenizer, loaded: a tokenizer.json that does not load is refused here. */
  tokenizer: TextTokenizer;
}

const ONNX_FOLDER = 'onnx';
/** The first line of a file Git LFS left in place of the real one (a clone without `git lfs`). */
const LFS_POINTER = 'version https://git-lfs.github.com/spec/v1';
const FROM_HUB = "download it from the model's hub repository, the same revision as the ONNX files";

/** Where each required file comes from, for the error that names it missing. */
const REQUIRED: Record<string, string> = {
  'config.json': `${FROM_HUB} (it sits at the top of the repository, beside onnx/)`,
  'tokenizer.json': `${FROM_HUB}; the edge and the shim turn text into ids with it (a repository with only tokenizer.model: transformers' AutoTokenizer.from_pretrained(REPO).save_pretrained(DIR) writes one)`,
  'tokenizer_config.json': `${FROM_HUB}; it names the special tokens and holds the chat template`,
};

export async function readHubFolder(input: string, options: { needOnnx: boolean }): Promise<HubFolder> {
  const dir = resolve(input);
  if (!existsSync(dir)) throw new AppError('NOT_FOUND', `${input}: no such folder`);
  if (!statSync(dir).isDirectory())
    throw new AppError(
      'INVALID_ARGUMENT',
      `${input} is a file: prepare takes the folder of a hub download (for one .onnx file, see models optimize and expose-hidden)`,
    );
  const roots = hubRoots(dir);
  for (const f of new Set([...Object.keys(REQUIRED), ...HUB_METADATA_FILES])) if (present(join(dir, f))) checkHubFile(join(dir, f), roots, MAX_METADATA_BYTES);
  const problems = Object.entries(REQUIRED)
    .filter(([f]) => !existsSync(join(dir, f)))
    .map(([f, from]) => `no ${f} in ${input}: ${from}`);
  const { onnxDir, onnxFiles } = findOnnxFiles(dir, input);
  if (options.needOnnx && !onnxDir) {
    problems.push(
      `no ONNX file in ${input} or ${join(input, ONNX_FOLDER)}: download the onnx/ folder of the model's hub repository (any of model.onnx with its model.onnx_data, model_fp16.onnx, model_q4.onnx, model_quantized.onnx), or pass --cloud-only for the shim's pack of an HTTP backend`,
    );
  }
  const onnxPaths = onnxDir ? onnxFilesWithData(onnxDir, onnxFiles) : [];
  for (const p of onnxPaths) checkHubFile(p, roots, p.endsWith('.onnx') ? MAX_ONNX_BYTES : Number.MAX_SAFE_INTEGER);
  const read = [...Object.keys(REQUIRED).map((f) => join(dir, f)), ...(options.needOnnx ? onnxFiles.map((f) => join(onnxDir!, f)) : [])];
  problems.push(
    ...read
      .filter((p) => existsSync(p) && statSync(p).isFile() && isLfsPointer(p))
      .map((p) => `${p} is a Git LFS pointer, not the file itself: fetch it (git lfs pull in the clone, or download the file from the hub)`),
  );
  if (problems.length) throw new AppError('NOT_FOUND', problems.join('; '));

  const config = readJsonFile(join(dir, 'config.json')) as Record<string, unknown>;
  const bound = weightBytesBound(config);
  // A file larger than every weight of the model in float32 is not this model's, whatever it holds.
  if (bound !== undefined) for (const p of onnxPaths) checkHubFile(p, roots, bound, "more than config.json's sizes allow for every weight in float32");
  const tokenizer = await TextTokenizer.fromPack(dir);
  const vocabSize = config.vocab_size;
  // The edge cuts its vocabulary to the smaller of the two, so another model's tokenizer would run unnoticed.
  if (Number.isInteger(vocabSize) && tokenizer.vocabSize > (vocabSize as number)) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${join(input, 'tokenizer.json')} knows ${tokenizer.vocabSize} tokens, more than config.json's vocab_size ${vocabSize as number}: it is another model's tokenizer; ${FROM_HUB}`,
    );
  }
  const metadata = HUB_METADATA_FILES.filter((f) => existsSync(join(dir, f)));
  return { dir, onnxDir, onnxFiles, config, metadata, tokenizer };
}

/** The hub's `onnx/` folder, or the folder itself when its ONNX files sit at the top; never both. */
function findOnnxFiles(dir: string, input: string): { onnxDir: string | undefined; onnxFiles: string[] } {
  const top = modelFiles(dir);
  const nested = modelFiles(join(dir, ONNX_FOLDER));
  if (top.length && nested.length) {
    throw new AppError('INVALID_ARGUMENT', `${input} holds ONNX files both at the top (${top.join(', ')}) and in onnx/ (${nested.join(', ')}): keep one set`);
  }
  const [onnxDir, files] = nested.length ? [join(dir, ONNX_FOLDER), nested] : [top.length ? dir : undefined, top];
  return { onnxDir, onnxFiles: [...files].sort((a, b) => Number(b === DEFAULT_MODEL_FILE) - Number(a === DEFAULT_MODEL_FILE) || a.localeCompare(b)) };
}

/** The ONNX files and their external data beside them (`model.onnx_data`, `model.onnx.data`, …: named after the file). */
function onnxFilesWithData(onnxDir: string, onnxFiles: readonly string[]): string[] {
  const entries = readdirSync(onnxDir);
  return onnxFiles.flatMap((f) => [f, ...entries.filter((e) => e !== f && e.startsWith(f))]).map((f) => join(onnxDir, f));
}

function isLfsPointer(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(LFS_POINTER.length);
    return readSync(fd, head, 0, head.length, 0) === head.length && head.toString('latin1') === LFS_POINTER;
  } finally {
    closeSync(fd);
  }
}
