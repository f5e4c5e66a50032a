/**
 * A backend call under a deadline: the step's or the prefill's signal aborts with the stream (or the
 * session), or with DEADLINE_EXCEEDED once the deadline passes.
 *
 * @example
 * const result = await withDeadline(route.signal, 10_000, (signal) => sequence.step({ ...request, signal }));
 */
import { AppError } from '../../shared/errors.ts';
import { abortReason } from '../../shared/grpc/stream.ts';

/** Runs `fn` with a signal that aborts with `parent`, or with DEADLINE_EXCEEDED after `ms`. */
export async function withDeadline<T>(parent: AbortSignal, ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(parent.reason);
  if (parent.aborted) onAbort();
  else parent.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new AppError('DEADLINE_EXCEEDED', `the backend did not answer within ${ms} ms`)), ms);
  try {
    return await fn(controller.signal);
  } catch (e) {
    throw controller.signal.aborted ? abortReason(controller.signal) : e;
  } finally {
    clearTimeout(timer);
    parent.removeEventListener('abort', onAbort);
  }
}
