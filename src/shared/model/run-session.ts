/**
 * Runs an ONNX session after checking the feeds against the session's declared inputs; on failure it
 * says which inputs were given with which types and shapes, so a mismatched export is easy to diagnose.
 */
import { AppError, errorMessage } from '../errors.ts';
import type { ModelSession, SessionFetches } from './model-session.ts';
import type { OrtTensor } from './ort.ts';

function describe(feeds: Record<string, OrtTensor>): string {
  return Object.entries(feeds)
    .map(([name, t]) => `${name}: ${t.type}[${t.dims.join(',')}]`)
    .join('; ');
}

/** `fetches` names every output wanted: `null` lets onnxruntime allocate it, a tensor is written in place. */
export async function runSession(session: ModelSession, feeds: Record<string, OrtTensor>, fetches?: SessionFetches): Promise<Record<string, OrtTensor>> {
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) throw new AppError('INTERNAL', `model inputs not fed: ${missing.join(', ')}`);
  try {
    // A map of its own: callers take outputs out of it (the fused layout's new_key_values.*).
    return { ...(await (fetches ? session.run(feeds, fetches) : session.run(feeds))) };
  } catch (e) {
    throw new AppError('INTERNAL', `onnxruntime run failed: ${errorMessage(e)} (inputs: ${describe(feeds)})`, { cause: e });
  }
}
