/** @jsxImportSource hono/jsx */
/**
 * A page run's event stream (GET /runs/:id/events), for the Generate and Compare panels and a chat's
 * replies alike: token spans with their heat-line bars, the figures (with what the cloud saw), then the end
 * status. A chat's turn also hands its reply to the conversation at the done event, before the end after
 * which the page sends the next message, and its figures lead with the prompt's cached share.
 *
 * @example
 * return streamSSE(c, (stream) => streamPageRun(stream, runtime, run, signal));
 */
import type { SSEStreamingApi } from 'hono/streaming';
import { errorMessage } from '../../shared/errors.ts';
import { ReplyFigures } from '../../../views/chat-fragments.tsx';
import { EndStatus, MetricsPanel } from '../../../views/run-fragments.tsx';
import { HeatBar, TokenSpan } from '../../../views/token-fragments.tsx';
import type { EdgeRuntime } from '../edge-runtime.ts';
import type { FinishReason } from '../loop/generation-events.ts';
import type { PageRun } from './pending-runs.ts';

/** Resolves when `done` does or `signal` fires, whichever is first. */
function untilOrAborted(done: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    signal.addEventListener('abort', () => resolve(), { once: true });
    void done.then(resolve);
  });
}

/** The end event's fragment; for a chat's turn that failed, it says the message was not kept. */
function endFragment(run: PageRun, end: { finish?: FinishReason; error?: string }): string {
  const error = end.error !== undefined && run.chatTurn ? `${end.error}; this message is not kept in the conversation` : end.error;
  return String(<EndStatus id={run.id} finish={end.finish} error={error} />);
}

/**
 * Waits for the run it is queued after, takes its slot (a refusal, such as a full edge, ends the stream
 * with the message), then streams. A run stopped before it began ends as stopped, or for a chat's turn
 * as a message not kept (no reply came).
 */
export async function streamPageRun(stream: SSEStreamingApi, runtime: EdgeRuntime, run: PageRun, signal: AbortSignal): Promise<void> {
  try {
    if (run.after) {
      await untilOrAborted(run.after.over, signal);
      if (!signal.aborted) await stream.writeSSE({ event: 'status', data: 'generating…' });
    }
    // Checked right before the start, with no await in between: the runtime only hears of an abort
    // that happens after it has started.
    if (run.stopped.aborted) {
      const end = run.chatTurn ? { error: 'stopped before the reply began' } : { finish: 'cancelled' as const };
      return void (await stream.writeSSE({ event: 'end', data: endFragment(run, end) }));
    }
    if (signal.aborted) return;
    const events = runtime.start(run.raw, run.id, run.promptIds).events(signal);
    for await (const event of events) {
      if (event.type === 'token') {
        await stream.writeSSE({ event: 'token', data: String(<TokenSpan event={event} request={run.request} />) });
        // llm_only's panel has no heat line: the router scores nothing there.
        if (run.request.mode !== 'llm_only') await stream.writeSSE({ event: 'heat', data: String(<HeatBar event={event} />) });
      } else {
        // Kept before the end reaches the page: the next message, sent as soon as Send is back, finds it.
        run.chatTurn?.commit(event.text);
        const { metrics, cloudText } = event;
        const figures = run.chatTurn ? (
          <ReplyFigures metrics={metrics} mode={run.request.mode} cloudText={cloudText} />
        ) : (
          <MetricsPanel metrics={metrics} mode={run.request.mode} cloudText={cloudText} />
        );
        await stream.writeSSE({ event: 'metrics', data: String(figures) });
        await stream.writeSSE({ event: 'end', data: endFragment(run, { finish: event.finishReason }) });
      }
    }
  } catch (e) {
    await stream.writeSSE({ event: 'end', data: endFragment(run, { error: errorMessage(e) }) });
  }
}
