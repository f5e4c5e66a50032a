/**
 * The shim keeps the routing decision of every step for its records (the seed paper's token index, router
 * score and threshold) in its debug log, and logs only the size of a hidden state, never its values.
 */
import { expect, test } from 'bun:test';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import { EdgeContext, startTestShim } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

test('each routed step is logged with its token index, router score and threshold', async () => {
  const lines: Record<string, unknown>[] = [];
  const shim = await startTestShim({}, { log: createLogger('shim', 'debug', (line) => lines.push(JSON.parse(line))) });
  const client = new GrpcCloudClient({ address: shim.address });
  try {
    const edge = new EdgeContext([1, 403]);
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'records' });
    const first = await conversation.next(edge.step({ routerScore: 0.125, threshold: 0.5, tokenIndex: 0 }));
    edge.push(first.tokens, 'llm');
    edge.push([261], 'slm');
    const hidden = Float32Array.from({ length: 64 }, (_, i) => i / 64);
    await conversation.next(edge.step({ routerScore: 0.375, threshold: 0.5, tokenIndex: 2, hiddenState: hidden }));
    await conversation.close();
  } finally {
    await client.close();
    await shim.shutdown();
  }
  const steps = lines.filter((l) => l.msg === 'step');
  expect(steps.map((s) => [s.tokenIndex, s.routerScore, s.threshold, s.hiddenState, s.delta, s.returned])).toEqual([
    [0, 0.125, 0.5, 0, 0, 1],
    [2, 0.375, 0.5, 64, 1, 1],
  ]);
  expect(JSON.stringify(lines)).not.toContain('0.984375'); // the hidden state's last value: sizes only
});
