/**
 * One generation's structured log lines, written around its event stream: `generation started`, a
 * warning at the first routed token the cloud could not serve (later ones are counted, not repeated, so
 * an outage does not write a line per token), and `generation finished` with the totals, or
 * `generation failed` with the error's code.
 *
 * @example
 * for await (const event of logGeneration(log, run.id, run.request, events)) yield event;
 */
import { errorMessage, isAppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/process/logger.ts';
import type { GenerationEvent } from '../loop/decoder-loop.ts';
import type { GenerationRequest } from '../request/generation-request.ts';

export async function* logGeneration(
  log: Logger,
  runId: string,
  request: GenerationRequest,
  events: AsyncIterable<GenerationEvent>,
): AsyncGenerator<GenerationEvent> {
  const { mode, threshold, maxNewTokens } = request;
  log.info('generation started', { run: runId, mode, threshold, maxNewTokens });
  let cloudFailures = 0;
  let tokens = 0;
  try {
    for await (const event of events) {
      if (event.type === 'token') {
        tokens++;
        if (event.cloudError && cloudFailures++ === 0) {
          log.warn('cloud step failed; the edge model chose the token', { run: runId, index: event.index, error: event.cloudError });
        }
      } else {
        const m = event.metrics;
        log.info('generation finished', {
          // The run's id is also the cloud's request_id (one id per generation), so it is written once.
          run: runId,
          mode,
          finishReason: event.finishReason,
          tokens: m.tokens,
          routed: m.routed,
          fallback: m.fallback,
          totalMs: Math.round(m.totalMs),
        });
      }
      yield event;
    }
  } catch (e) {
    log.warn('generation failed', { run: runId, mode, tokens, fallback: cloudFailures, code: isAppError(e) ? e.code : 'INTERNAL', error: errorMessage(e) });
    throw e;
  }
}
