/**
 * The part of onnxruntime's `InferenceSession` that the decoder and runSession use, so that a session on
 * this thread and one on a worker thread (worker-session.ts) are interchangeable. onnxruntime-node's own
 * session satisfies it as it is.
 *
 * @example
 * const session: ModelSession = thread === 'worker' ? await openSessionOnWorker(path, {}, ['cpu']) : ...;
 * const out = await runSession(session, feeds);
 */
import type { OrtTensor, ValueMetadata } from './ort.ts';

/** Outputs wanted, by name: `null` lets onnxruntime allocate one, a tensor is written in place. */
export type SessionFetches = Readonly<Record<string, OrtTensor | null>>;

/** Where a model's forward passes run: on the JavaScript thread, or on a worker thread of their own. */
export type ModelThread = 'main' | 'worker';

export const MODEL_THREADS: readonly ModelThread[] = ['worker', 'main'];

export interface ModelSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly ValueMetadata[];
  readonly outputMetadata: readonly ValueMetadata[];
  run(feeds: Readonly<Record<string, OrtTensor>>, fetches?: SessionFetches): Promise<Readonly<Record<string, OrtTensor>>>;
  release(): Promise<void>;
  /** Writes the profile of the runs so far (sessions created with `enableProfiling`). */
  endProfiling(): void;
}
