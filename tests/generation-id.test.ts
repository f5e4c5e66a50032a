/**
 * One id per generation (issue 47): the id a run starts with (the page's run, the API's) is the one in the
 * runtime's log lines, the `done` event's `request_id`, and the `request_id` the cloud conversation opens
 * with, which the shim logs and sends to its backend.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { CloudClient } from '../src/edge/cloud/cloud-client.ts';
import type { GenerationEvent } from '../src/edge/loop/decoder-loop.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

let edge: TestEdge;
const opened: string[] = [];
const logged: Record<string, unknown>[] = [];

beforeAll(async () => {
  const log = { debug() {}, info: (_: string, fields?: Record<string, unknown>) => void logged.push(fields ?? {}), warn() {}, error() {} };
  edge = await startTestEdge({
    log,
    cloud: (inner): CloudClient => ({
      openConversation: (options) => (opened.push(options.requestId), inner.openConversation(options)),
      state: () => inner.state(),
      close: () => inner.close(),
    }),
  });
});
afterAll(() => edge.release());

test("a run's id is its log lines', its done event's and its cloud conversation's", async () => {
  const events: GenerationEvent[] = [];
  for await (const e of edge.runtime.start({ prompt: 'Once upon a time', mode: 'llm_only', maxNewTokens: 3 }, 'run-42').events()) events.push(e);
  const done = events.at(-1)!;
  expect(done.type === 'done' && done.requestId).toBe('run-42');
  expect(opened).toEqual(['run-42']);
  expect(logged.some((fields) => Object.values(fields).includes('run-42'))).toBe(true);
});
