/**
 * The edge's gRPC cloud client: what it puts on the wire (the context once, then deltas), lazy connect,
 * deadlines, the circuit breaker and reconnection, and cleanup. A recording server stands in for the
 * shim where the test is about the messages; the real shim where it is about behaviour.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import { GrpcCloudClient } from '../src/edge/grpc-cloud-client.ts';
import { CloudBackoff } from '../src/edge/cloud-backoff.ts';
import type { DecoderModel } from '../src/shared/decoder-session.ts';
import { cloudRouterService, serializeRouteRequest, type CloudRouterHandlers, type RouteRequest__Output } from '../src/shared/grpc-proto.ts';
import { EdgeContext, greedyReference, loadCloudModel, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';

/** A CloudRouter that records every message and answers each step with `answer` (or never, when null). */
class RecordingShim {
  readonly messages: RouteRequest__Output[] = [];
  readonly server = new grpc.Server();
  port = 0;
  answer: number[] | null = [7];
  private held = 0;

  async start(): Promise<void> {
    const handlers: CloudRouterHandlers = {
      Route: (call) => {
        call.on('data', (m: RouteRequest__Output) => {
          this.messages.push(m);
          if (m.open) call.write({ opened: { sessionId: 'rec', backend: 'recording' } });
          if (m.step && this.answer) {
            this.held += (m.step.ids.length) + this.answer.length;
            call.write({ step: { ids: this.answer, logprobs: this.answer.map(() => -0.5), contextLength: this.contextLength() } });
          }
        });
        call.on('end', () => {
          call.write({ end: { code: 0, message: 'OK' } });
          call.end();
        });
        call.on('error', () => {});
      },
    };
    this.server.addService(cloudRouterService, handlers);
    this.port = await new Promise((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
  }

  private contextLength(): number {
    const open = this.messages.findLast((m) => m.open)?.open;
    return (open?.contextIds.length ?? 0) + this.held;
  }

  resetContext(): void {
    this.held = 0;
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

describe('what the client sends', () => {
  let rec: RecordingShim;
  beforeAll(async () => {
    rec = new RecordingShim();
    await rec.start();
  }, 30_000);
  afterAll(() => rec.stop());

  test('the context once, then only new ids with their offsets and sources; the shim’s own tokens never go back', async () => {
    rec.messages.length = 0;
    rec.resetContext();
    rec.answer = [7];
    const client = new GrpcCloudClient({ address: `127.0.0.1:${rec.port}` });
    try {
      const edge = new EdgeContext([1, 403, 407]);
      const session = client.openSession({ requestId: 'wire' });
      const first = await session.next(edge.step({ tokenIndex: 0 }));
      edge.push(first.tokens, 'llm');
      edge.push([261, 378], 'slm');
      await session.next(edge.step({ tokenIndex: 3, routerScore: 0.125 }));
      edge.push([7], 'llm');
      await session.next(edge.step({ tokenIndex: 4, temperature: 0.5, hiddenState: new Float32Array([0.25, -1]) }));
      await session.close();

      const [open, s1, s2, s3] = rec.messages;
      expect(open!.open).toMatchObject({ requestId: 'wire', contextIds: [1, 403, 407], contextSources: ['TOKEN_SOURCE_PROMPT', 'TOKEN_SOURCE_PROMPT', 'TOKEN_SOURCE_PROMPT'] });
      expect(open!.open!.sampling).toMatchObject({ temperature: 0, topP: 1, stopTokenIds: [2], topLogprobs: 0 });
      expect(s1!.step).toMatchObject({ offset: 3, ids: [], sources: [], tokenIndex: 0, maxTokens: 1, sampling: null });
      expect(s2!.step).toMatchObject({ offset: 4, ids: [261, 378], sources: ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_SLM'], tokenIndex: 3, sampling: null, slmHiddenState: [] });
      expect(s2!.step!.routerScore).toBeCloseTo(0.125, 6);
      // Only the settings that changed travel again, and the hidden state only when the loop passes it.
      expect(s3!.step).toMatchObject({ offset: 7, ids: [], slmHiddenState: [0.25, -1] });
      expect(s3!.step!.sampling!.temperature).toBeCloseTo(0.5, 6);
      expect(rec.messages).toHaveLength(4);
    } finally {
      await client.close();
    }
  });

  test('a one-token routed step is at most 64 bytes on the wire', () => {
    // Worst realistic values: a Qwen-sized id, a long context, a fractional score.
    const bytes = serializeRouteRequest({
      step: { offset: 32_767, ids: [151_643], sources: ['TOKEN_SOURCE_SLM'], tokenIndex: 32_000, maxTokens: 1, routerScore: 0.3127, threshold: 0.55 },
    });
    expect(bytes.length).toBeLessThanOrEqual(64);
    expect(bytes.length).toBe(30);
  });

  test('a step that gets no answer fails at its deadline, and the circuit opens', async () => {
    rec.answer = null;
    const client = new GrpcCloudClient({ address: `127.0.0.1:${rec.port}`, stepTimeoutMs: 150, backoff: { initialMs: 60_000 } });
    try {
      const session = client.openSession({ requestId: 'slow' });
      const started = performance.now();
      expect(await rejectionCode(session.next(new EdgeContext([1]).step()))).toBe('DEADLINE_EXCEEDED');
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(client.state()).toBe('circuit-open');
      const error = await session.next(new EdgeContext([1]).step()).catch((e) => e);
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toContain('next attempt in');
    } finally {
      rec.answer = [7];
      await client.close();
    }
  });
});

describe('connection handling (real shim)', () => {
  let model: DecoderModel;
  beforeAll(async () => {
    ({ model } = await loadCloudModel());
  }, 30_000);
  afterAll(() => model.release());

  test('lazy: no channel until the first step, then ready', async () => {
    const shim = await startTestShim();
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const session = client.openSession({ requestId: 'lazy' });
      expect(client.state()).toBe('idle');
      expect(shim.store.count).toBe(0);
      await session.next(new EdgeContext([1]).step());
      expect(client.state()).toBe('ready');
      expect(shim.store.count).toBe(1);
      await session.close();
      expect(shim.store.count).toBe(0);
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('the shim going away: UNAVAILABLE, fast failures while the circuit is open, then reconnection', async () => {
    let shim = await startTestShim();
    const port = shim.port;
    const client = new GrpcCloudClient({ address: shim.address, backoff: { initialMs: 150, maxMs: 150 }, stepTimeoutMs: 2_000 });
    try {
      const edge = new EdgeContext([1]);
      const session = client.openSession({ requestId: 'restart' });
      edge.push((await session.next(edge.step())).tokens, 'llm');
      await shim.shutdown();

      expect(await rejectionCode(session.next(edge.step()))).toBe('UNAVAILABLE');
      expect(client.state()).toBe('circuit-open');
      const started = performance.now();
      expect(await rejectionCode(session.next(edge.step()))).toBe('UNAVAILABLE');
      expect(performance.now() - started).toBeLessThan(20);

      shim = await startTestShim({ port });
      await waitFor(() => client.state() !== 'circuit-open', 2_000, 'backoff to pass');
      let reply;
      for (let attempt = 0; !reply && attempt < 20; attempt++) {
        reply = await session.next(edge.step({ maxTokens: 2 })).catch(async () => {
          await waitFor(() => client.state() !== 'circuit-open', 2_000, 'backoff to pass');
          return undefined;
        });
      }
      expect(reply!.tokens).toEqual(await greedyReference(model, edge.ids, 2));
      expect(reply!.cachedTokens).toBe(0); // the new stream carried the whole context
      expect(client.backoff.consecutiveFailures).toBe(0);
      await session.close();
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('when the edge’s context no longer holds what the shim returned, a new stream carries it whole', async () => {
    const shim = await startTestShim();
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const session = client.openSession({ requestId: 'diverge' });
      const edge = new EdgeContext([1, 403]);
      await session.next(edge.step({ maxTokens: 3 }));
      edge.push([261, 376], 'slm'); // the edge kept its own tokens instead
      const reply = await session.next(edge.step({ maxTokens: 2 }));
      expect(reply.tokens).toEqual(await greedyReference(model, edge.ids, 2));
      expect(reply.cachedTokens).toBe(0);
      await session.close();
      await waitFor(() => shim.store.count === 0, 2_000, 'both sessions freed');
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('close() frees every session and later calls are refused', async () => {
    const shim = await startTestShim();
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const sessions = [0, 1, 2].map((i) => client.openSession({ requestId: `close-${i}` }));
      await Promise.all(sessions.map((s) => s.next(new EdgeContext([1]).step())));
      expect(shim.store.count).toBe(3);
      await client.close();
      await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
      expect(await rejectionCode(sessions[0]!.next(new EdgeContext([1]).step()))).toBe('FAILED_PRECONDITION');
      expect(() => client.openSession({ requestId: 'late' })).toThrow(/closed/);
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });
});

describe('backoff', () => {
  test('delays double up to the maximum; one success closes the circuit', () => {
    let now = 0;
    const backoff = new CloudBackoff({ initialMs: 100, maxMs: 400, jitter: 0 }, () => now);
    backoff.check();
    const openFor = () => {
      let t = 0;
      while (backoff.open) now = ++t + start;
      return t;
    };
    let start = now;
    backoff.failure();
    expect(() => backoff.check()).toThrow(/next attempt in 100 ms/);
    expect(openFor()).toBe(100);
    for (const expected of [200, 400, 400]) {
      start = now;
      backoff.failure();
      expect(openFor()).toBe(expected);
    }
    backoff.failure();
    backoff.success();
    expect(backoff.open).toBe(false);
    expect(backoff.consecutiveFailures).toBe(0);
  });
});
