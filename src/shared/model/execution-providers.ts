/**
 * Which onnxruntime execution providers a model session runs on. A setting names them in order of
 * preference (`cpu`, `coreml,cpu`, `cuda,cpu`, `webgpu,cpu`); onnxruntime then gives each graph node to the
 * first provider of the list that can run it. Everything is decided while the models load, at start-up: a
 * provider this platform's onnxruntime lacks is an error naming the ones it has, or, when the list ends in
 * `cpu`, is dropped with a logged warning; a provider that is present but cannot start (WebGPU without a GPU
 * adapter, CUDA without its libraries) is treated the same way. A request never meets a missing provider.
 *
 * @example
 * const providers = parseExecutionProviders('cuda,cpu'); // ['cuda', 'cpu']
 * const { session, executionProviders } = await createSessionOn('model.onnx', {}, providers, log);
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { AppError, errorMessage } from '../errors.ts';
import { silentLogger, type Logger } from '../process/logger.ts';
import { ort, type InferenceSession, type SessionOptions } from './ort.ts';

const PROVIDER_NAME = /^[a-z][a-z0-9_]*$/;

/**
 * Splits a comma-separated list of provider names (case and spaces ignored); throws INVALID_ARGUMENT on an
 * empty list, a malformed name or a repeated one, naming `what` (the flag) in the message.
 *
 * @example
 * parseExecutionProviders(' WebGPU , cpu'); // ['webgpu', 'cpu']
 */
export function parseExecutionProviders(text: string, what = '--execution-provider'): string[] {
  const names = text.split(',').map((n) => n.trim().toLowerCase());
  for (const name of names) {
    if (!PROVIDER_NAME.test(name))
      throw new AppError('INVALID_ARGUMENT', `${what} takes onnxruntime provider names separated by commas (e.g. cuda,cpu), got ${JSON.stringify(text)}`);
  }
  const repeated = names.find((n, i) => names.indexOf(n) !== i);
  if (repeated) throw new AppError('INVALID_ARGUMENT', `${what} names ${repeated} twice`);
  return names;
}

/** Where onnxruntime-node keeps this platform's binding and the provider libraries installed beside it. */
function bindingFolder(): string {
  const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
  return join(dirname(entry), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

const SHARED_LIBRARY = { win32: '.dll', darwin: '.dylib' } as Partial<Record<NodeJS.Platform, string>>;

/**
 * The providers this platform's onnxruntime-node can load: those built into its binding, plus those it
 * ships separately (CUDA, TensorRT on Linux x64, fetched by its install script) whose library is present.
 *
 * @example
 * availableExecutionProviders(); // ['cpu', 'webgpu'] on Linux x64 without the CUDA files
 */
export function availableExecutionProviders(): string[] {
  const suffix = SHARED_LIBRARY[process.platform] ?? '.so';
  return ort
    .listSupportedBackends()
    .filter((b) => b.bundled || existsSync(join(bindingFolder(), `libonnxruntime_providers_${b.name}${suffix}`)))
    .map((b) => b.name);
}

/**
 * The requested list reduced to what `available` holds. A list ending in `cpu` loses the missing ones with
 * a warning; any other list with a missing provider is refused, and the message names the available ones.
 *
 * @example
 * resolveExecutionProviders(['coreml', 'cpu'], ['cpu', 'webgpu'], log); // ['cpu'], after a warning
 */
export function resolveExecutionProviders(requested: readonly string[], available: readonly string[], log: Logger = silentLogger): string[] {
  const missing = requested.filter((n) => !available.includes(n));
  if (missing.length === 0) return [...requested];
  const where = `${process.platform}/${process.arch}`;
  const list = available.join(', ');
  if (requested.at(-1) !== 'cpu') {
    throw new AppError(
      'INVALID_ARGUMENT',
      `execution provider ${missing.join(', ')} is not available in this platform's onnxruntime (${where}); available: ${list} (end the list with cpu to fall back to it)`,
    );
  }
  log.warn('execution provider not available; falling back', { missing, available, using: requested.filter((n) => available.includes(n)) });
  return requested.filter((n) => available.includes(n));
}

export interface SessionOnProviders {
  session: InferenceSession;
  /** The providers the session was created with, in order of preference. */
  executionProviders: readonly string[];
}

/**
 * Creates an onnxruntime session on `requested` (checked with `resolveExecutionProviders`). A provider that
 * is there but fails to start (no GPU adapter, missing driver libraries) makes the session fall back to
 * `cpu` with a warning when the list ends in `cpu`, and is an error naming the provider otherwise.
 *
 * @example
 * const { session } = await createSessionOn(pack.modelPath, { graphOptimizationLevel: 'all' }, ['cpu']);
 */
export async function createSessionOn(
  model: string | Uint8Array,
  options: SessionOptions,
  requested: readonly string[],
  log: Logger = silentLogger,
): Promise<SessionOnProviders> {
  const providers = resolveExecutionProviders(requested, availableExecutionProviders(), log);
  try {
    return { session: await create(model, options, providers), executionProviders: providers };
  } catch (e) {
    if (providers.length === 1 && providers[0] === 'cpu') throw e;
    if (providers.at(-1) !== 'cpu') {
      throw new AppError(
        'FAILED_PRECONDITION',
        `execution provider ${providers.join(',')} could not start: ${errorMessage(e)} (end the list with cpu to fall back to it)`,
        { cause: e },
      );
    }
    log.warn('execution provider could not start; falling back to cpu', { providers, error: errorMessage(e) });
    return { session: await create(model, options, ['cpu']), executionProviders: ['cpu'] };
  }
}

function create(model: string | Uint8Array, options: SessionOptions, providers: readonly string[]): Promise<InferenceSession> {
  const withProviders = { ...options, executionProviders: providers };
  return typeof model === 'string' ? ort.InferenceSession.create(model, withProviders) : ort.InferenceSession.create(model, withProviders);
}
