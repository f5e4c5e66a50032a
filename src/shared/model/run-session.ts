/**
 * Runs an ONNX session after checking the feeds against the session's declared inputs; on failure it
 * says which inputs were given with which types and shapes, so a mismatched export is easy to diagnose.
 */
import { AppError, errorMessage } from '../errors.ts';
import type { InferenceSession, OrtTensor } from './ort.ts';

function describe(feeds: Record<string, OrtTensor>): string {
  return Object.entries(feeds)
    .map(([name, t]) => `${name}: ${t.type}[${t.dims.join(',')}]`)
    .join('; ');
}

/** `fetches` names every output wanted: `null` lets onnxruntime allocate it, a tensor is written in place. */
export async function runSession(
  session: InferenceSession,
  feeds: Record<string, OrtTensor>,
  fetches?: Record<string, OrtTensor | null>,
): Promise<Record<string, OrtTensor>> {
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) throw new AppError('INTERNAL', `model inputs not fed: ${missing.join(', ')}`);
  try {
    return (await (fetches ? session.run(feeds, fetches) : session.run(feeds))) as Record<string, OrtTensor>;
  } catch (e) {
    throw new AppError('INTERNAL', `onnxruntime run failed: ${errorMessage(e)} (inputs: ${describe(feeds)})`, { cause: e });
  }
}
