/**
 * One generation of an edge runtime run to its end, for tests that act between its tokens (kill a shim,
 * stop the cloud) and then look at what it emitted.
 *
 * @example
 * const { tokens, done } = await generateAll(runtime, { prompt: 'Once', mode: 'joint' }, async (token, so_far) => {
 *   if (so_far.length === 3) await shim.kill();
 * });
 */
import { expect } from 'bun:test';
import type { DoneEvent, GenerationEvent, TokenEvent } from '../../src/edge/loop/decoder-loop.ts';
import type { EdgeRuntime } from '../../src/edge/edge-runtime.ts';
import type { RawGenerationRequest } from '../../src/edge/request/generation-request.ts';

/** Runs one generation to its end; `onToken` may act between tokens (the loop waits for it). Exactly one `done`, last. */
export async function generateAll(runtime: EdgeRuntime, raw: RawGenerationRequest, onToken?: (token: TokenEvent, tokens: TokenEvent[]) => Promise<void>) {
  const events: GenerationEvent[] = [];
  const tokens: TokenEvent[] = [];
  for await (const event of runtime.start(raw).events()) {
    events.push(event);
    if (event.type === 'token') {
      tokens.push(event);
      await onToken?.(event, tokens);
    }
  }
  const done = events.at(-1) as DoneEvent;
  expect(done.type).toBe('done');
  expect(events.filter((e) => e.type === 'done')).toHaveLength(1);
  return { tokens, done };
}
