/**
 * A decoder pack's onnxruntime session, opened on the thread DecoderLoadOptions.thread asks for, with what
 * its export declares (decoder-io.ts). On a worker (worker-session.ts) every output crosses back as a new
 * buffer, which is what onnxruntime allocates anyway, except where the export has the cache written in
 * place: a fused graph without `new_key_values.*` fetches its preallocated buffers as present.*, and a
 * worker would write its own copies of them. Such a pack is opened again on the main thread, and the log
 * says why.
 *
 * @example
 * const { session, io, thread } = await openDecoderSession(pack, { thread: 'worker', log });
 */
import { type DecoderIo, readDecoderIo } from './decoder-io.ts';
import type { DecoderLoadOptions } from './decoder-types.ts';
import { createSessionOn } from './execution-providers.ts';
import type { ModelPack } from './model-pack.ts';
import type { ModelSession, ModelThread } from './model-session.ts';
import { openSessionOnWorker } from './worker-session.ts';

export interface DecoderSession {
  session: ModelSession;
  io: DecoderIo;
  /** The execution providers the session runs on, in order of preference (after any fallback). */
  executionProviders: readonly string[];
  /** Where its forward passes run: as asked, or `main` where the export writes outputs in place. */
  thread: ModelThread;
}

/** Whether runs of this export hand onnxruntime preallocated outputs to write (the fused layout without new_key_values.*). */
export function writesOutputsInPlace(io: DecoderIo): boolean {
  return io.layout === 'fused' && !io.newKeyValues;
}

export async function openDecoderSession(pack: ModelPack, options: DecoderLoadOptions): Promise<DecoderSession> {
  const sessionOptions = {
    graphOptimizationLevel: 'all',
    ...(options.threads ? { intraOpNumThreads: options.threads, interOpNumThreads: 1 } : {}),
    ...(options.profileFilePrefix ? { enableProfiling: true, profileFilePrefix: options.profileFilePrefix } : {}),
  } as const;
  const requested = options.executionProviders ?? ['cpu'];
  const thread = options.thread ?? 'main';
  const { session, executionProviders } =
    thread === 'worker'
      ? await openSessionOnWorker(pack.modelPath, sessionOptions, requested, options.log)
      : await createSessionOn(pack.modelPath, sessionOptions, requested, options.log);
  let io: DecoderIo;
  try {
    io = readDecoderIo({ where: pack.modelPath, numLayers: pack.numLayers, inputs: session.inputMetadata, outputs: session.outputMetadata });
  } catch (e) {
    await session.release();
    throw e;
  }
  if (thread === 'worker' && writesOutputsInPlace(io)) {
    await session.release();
    options.log?.info('the decoder runs on the main thread, not a worker thread', {
      model: pack.modelPath,
      reason: 'its fused KV layout has no new_key_values.* outputs, so onnxruntime writes the cache buffers in place, which a worker thread cannot do for them',
    });
    return openDecoderSession(pack, { ...options, thread: 'main' });
  }
  return { session, io, executionProviders, thread };
}
