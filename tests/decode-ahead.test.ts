/**
 * Decoding ahead while a routed step is on the network. onnxruntime-node runs a forward pass on the
 * JavaScript thread, so a reply that arrives during a pass is read only when the event loop turns: the loop
 * must let it turn after each pass, or it starts the next pass first and the routed token waits one pass more.
 * Here a pass blocks the thread as onnxruntime-node's does, and the reply is a real child process's output.
 * With the model on a worker thread the reply is read during the pass: the routed token's wait ends then.
 */
import { describe, expect, test } from 'bun:test';
import { replyWhileDecodingAhead } from '../src/edge/loop/ask-cloud.ts';
import type { CloudReply } from '../src/edge/loop/cloud-reply.ts';
import type { AppendResult } from '../src/shared/model/decoder-model.ts';
import { decodeAhead, type SpeculationHooks } from '../src/edge/loop/speculation/decode-ahead.ts';

/** A forward pass as onnxruntime-node runs one: queued with setImmediate, then holding the thread. */
function blockingPass(ms: number): Promise<{ result: AppendResult; ms: number }> {
  return new Promise((resolve) =>
    setImmediate(() => {
      const start = performance.now();
      while (performance.now() - start < ms);
      resolve({ result: { logits: new Float32Array([0, 1]), hidden: new Float32Array(2) } as unknown as AppendResult, ms });
    }),
  );
}

test('a reply that arrives during a pass stops decoding ahead before the next pass starts', async () => {
  const child = Bun.spawn(['sh', '-c', 'echo ready; sleep 0.05; echo reply'], { stdout: 'pipe' });
  const reader = child.stdout.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  // The first line says the child runs; the reply comes 50 ms later, in the middle of the first pass.
  while (!seen.includes('ready')) seen += decoder.decode((await reader.read()).value);
  let replied = false;
  void (async () => {
    while (!seen.includes('reply')) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += decoder.decode(value);
    }
    replied = true;
  })();
  const hooks: SpeculationHooks = {
    feed: () => blockingPass(400),
    score: async () => ({ score: 0.9, ms: 0 }),
    routes: () => false,
    pick: () => 1,
    isEos: () => false,
    replied: () => replied,
  };
  const steps = await decodeAhead(1, 8, hooks);
  await child.exited;
  expect(replied).toBe(true);
  expect(steps).toHaveLength(1);
});

describe("the routed token's wait", () => {
  const served: CloudReply = { kind: 'failed', reason: 'a reply' };
  const hang = <T>(p: Promise<T>) => Promise.race([p, Bun.sleep(2_000).then(() => 'still waiting' as const)]);

  test('ends when the reply is read, while a speculative pass is still running', async () => {
    const passInFlight = new Promise<void>(() => {});
    expect(await hang(replyWhileDecodingAhead(Promise.resolve(served), passInFlight))).toBe(served);
  });

  test('waits for the reply when decoding ahead stopped first (its steps are held)', async () => {
    let answer!: (r: CloudReply) => void;
    const reply = new Promise<CloudReply>((resolve) => (answer = resolve));
    const waiting = replyWhileDecodingAhead(reply, Promise.resolve());
    setTimeout(() => answer(served), 10);
    expect(await waiting).toBe(served);
  });

  test("ends with the edge model's failure, without waiting for the reply", async () => {
    const failed = Promise.reject(new Error('onnxruntime run failed'));
    await expect(hang(replyWhileDecodingAhead(new Promise<CloudReply>(() => {}), failed))).rejects.toThrow('onnxruntime run failed');
  });
});
