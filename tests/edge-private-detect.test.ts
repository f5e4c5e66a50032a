/**
 * Detection on a running edge: the box's kinds (--private-detect) and an operator's pattern
 * (--private-pattern) find entities in every prompt, a request adds kinds of its own, and none of what was
 * found reaches the cloud; the done event says what left. A request naming a kind the edge does not know is
 * refused before anything runs.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { interceptSteps } from '../src/edge/cloud/cloud-client.ts';
import type { DoneEvent } from '../src/edge/loop/decoder-loop.ts';
import { PrivateDetector } from '../src/edge/privacy/private-detect.ts';
import { parsePrivateDetection } from '../src/edge/privacy/private-detect.ts';
import { startTestEdge, type TestEdge } from './helpers/edge-runtime.ts';

let edge: TestEdge;
const sent: string[] = [];

beforeAll(async () => {
  const { kinds, patterns } = parsePrivateDetection('email', ['badge=B-[0-9]{4}']);
  edge = await startTestEdge({
    privateDetector: PrivateDetector.create(kinds, patterns),
    cloud: (inProcess) => interceptSteps(inProcess, (request, next) => (sent.push(tokenizerText(request.context)), next(request))),
  });
});
afterAll(() => edge.release());

const tokenizerText = (ids: readonly number[]) => edge.runtime.engine.tokenizer.decode(ids);

async function run(raw: Record<string, unknown>): Promise<DoneEvent> {
  const { events } = edge.runtime.start({ mode: 'llm_only', maxNewTokens: 6, ...raw });
  for await (const event of events()) if (event.type === 'done') return event;
  throw new Error('no done event');
}

describe('detection on the edge', () => {
  test("the box's kinds and the operator's pattern are found in every prompt; the cloud reads placeholders", async () => {
    sent.length = 0;
    const done = await run({ prompt: 'Mail tim@example.org about badge B-1234 and call +44 20 7946 0958. Tim' });
    const seen = sent.join('\n');
    expect(seen).toContain('[EMAIL_1]');
    expect(seen).toContain('[BADGE_1]');
    expect(seen).not.toContain('tim@example.org');
    expect(seen).not.toContain('B-1234');
    // Phones are not among the box's kinds: that number goes as it is.
    expect(seen).toContain('+44 20 7946 0958');
    expect(done.metrics.cloud.placeholders).toBe(2);
    expect(done.cloudText).toContain('[BADGE_1]');
  });

  test('a request adds a kind; one the edge does not know is refused with the kinds it does', async () => {
    sent.length = 0;
    await run({ prompt: 'Call +44 20 7946 0958 now. Then', privateDetect: ['phone'] });
    expect(sent.join('\n')).not.toContain('7946');
    expect(() => edge.runtime.start({ prompt: 'x', privateDetect: ['dna'] })).toThrow(
      'private_detect names "dna", which this edge does not detect (it knows: email, phone, card, iban, ip, badge)',
    );
  });
});
