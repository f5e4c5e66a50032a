/**
 * A minimal client of the edge's SSE streams: reads a response body as it arrives and keeps its events
 * (`event:` name, joined `data:` lines), so a test can wait for some to arrive and look at how it ended.
 *
 * @example
 * const stream = readSse(await fetch(url, { method: 'POST', body }));
 * await stream.waitFor((events) => events.length >= 3);
 * await stream.ended; // true once the server closed the stream
 */
import { waitFor } from './cloud-fixture.ts';

export interface SseEvent {
  event: string;
  data: string;
}

export interface SseStream {
  readonly events: SseEvent[];
  /** Resolves when the body ends (the server closed the stream) or fails (`false`: a cut connection). */
  readonly ended: Promise<boolean>;
  waitFor(condition: (events: SseEvent[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  cancel(): Promise<void>;
}

export function readSse(response: Response): SseStream {
  const events: SseEvent[] = [];
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    let buffer = '';
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        buffer += decoder.decode(r.value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n');
          const event =
            lines
              .find((l) => l.startsWith('event:'))
              ?.slice(6)
              .trim() ?? 'message';
          const data = lines
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).replace(/^ /, ''))
            .join('\n');
          events.push({ event, data });
        }
      }
      return true;
    } catch {
      return false;
    }
  })();
  return {
    events,
    ended,
    waitFor: (condition, timeoutMs = 10_000, what = 'SSE events') => waitFor(() => condition(events), timeoutMs, what),
    cancel: () => reader.cancel(),
  };
}
