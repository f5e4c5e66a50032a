/**
 * The edge's gRPC cloud client: what it puts on the wire (the context once, then deltas), lazy connect,
 * deadlines, the circuit breaker and reconnection, and cleanup. A recording server stands in for the
 * shim where the test is about the messages; the real shim where it is about behaviour.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { startDelayProxy } from '../src/tools/delay-proxy/delay-proxy.ts';
import { CircuitOpenError, CloudBackoff } from '../src/edge/cloud/cloud-backoff.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { cloudRouterService, serializeRouteRequest, type CloudRouterHandlers, type RouteRequest__Output } from '../src/shared/grpc/proto.ts';
import { EdgeContext, greedyReference, loadCloudModel, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

/** A CloudRouter that records every message and answers each step with `answer` (or never, when null). */
class RecordingShim {
  readonly messages: RouteRequest__Output[] = [];
  readonly server = new grpc.Server();
  port = 0;
  answer: number[] | null = [7];
  private held = 0;

  async start(): Promise<void> {
    const handlers: CloudRouterHandlers = {
      Score: (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: 'not this test shim' }),
      Describe: (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: 'not this test shim' }),
      Route: (call) => {
        call.on('data', (m: RouteRequest__Output) => {
          this.messages.push(m);
          if (m.open) call.write({ opened: { sessionId: 'rec', backend: 'recording' } });
          if (m.step && this.answer) {
            this.held += m.step.ids.length + this.answer.length;
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
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'wire' });
      const first = await conversation.next(edge.step({ tokenIndex: 0 }));
      edge.push(first.tokens, 'llm');
      edge.push([261, 378], 'slm');
      await conversation.next(edge.step({ tokenIndex: 3, routerScore: 0.125 }));
      edge.push([7], 'llm');
      await conversation.next(edge.step({ tokenIndex: 4, temperature: 0.5, hiddenState: new Float32Array([0.25, -1]) }));
      await conversation.close();

      const [open, s1, s2, s3] = rec.messages;
      expect(open!.open).toMatchObject({
        requestId: 'wire',
        contextIds: [1, 403, 407],
        contextSources: ['TOKEN_SOURCE_PROMPT', 'TOKEN_SOURCE_PROMPT', 'TOKEN_SOURCE_PROMPT'],
      });
      expect(open!.open!.sampling).toMatchObject({ temperature: 0, topP: 1, stopTokenIds: [2], topLogprobs: 0 });
      expect(s1!.step).toMatchObject({ offset: 3, ids: [], sources: [], tokenIndex: 0, maxTokens: 1, sampling: null });
      expect(s2!.step).toMatchObject({
        offset: 4,
        ids: [261, 378],
        sources: ['TOKEN_SOURCE_SLM', 'TOKEN_SOURCE_SLM'],
        tokenIndex: 3,
        sampling: null,
        slmHiddenState: [],
      });
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

  test('a one-token extend is 10-14 bytes on the wire, as the contract says', () => {
    const extend = (offset: number, id: number) => serializeRouteRequest({ extend: { offset, ids: [id], sources: ['TOKEN_SOURCE_SLM'] } }).length;
    expect([extend(5, 7), extend(300, 400), extend(32_767, 151_643)]).toEqual([10, 12, 14]);
  });

  test('a step that gets no answer fails at its deadline, and that one miss opens the circuit', async () => {
    rec.answer = null;
    const client = new GrpcCloudClient({ address: `127.0.0.1:${rec.port}`, stepTimeoutMs: 150, backoff: { initialMs: 60_000, failureThreshold: 3 } });
    try {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'slow' });
      expect(await rejectionCode(conversation.next(new EdgeContext([1]).step()))).toBe('DEADLINE_EXCEEDED');
      expect(client.backoff.consecutiveFailures).toBe(1);
      expect(client.state()).toBe('circuit-open');
      const sent = rec.messages.length;
      for (let i = 0; i < 3; i++) {
        const error = await conversation.next(new EdgeContext([1]).step()).catch((e) => e);
        expect(error).toBeInstanceOf(CircuitOpenError);
        expect(error.code).toBe('UNAVAILABLE');
        expect(error.message).toMatch(/after 1 failed attempt\(s\); circuit open, next attempt in \d+ ms/);
      }
      // Refusals try nothing and count as nothing.
      expect(rec.messages.length).toBe(sent);
      expect(client.backoff.consecutiveFailures).toBe(1);
    } finally {
      rec.answer = [7];
      await client.close();
    }
  });

  test('half-open: one probe goes to the shim while other steps are refused; a failed probe reopens for longer', async () => {
    rec.answer = null;
    // The health probe off: here a routed step is the probe (the health probe's turn is in cloud-health-probe.test.ts).
    const client = new GrpcCloudClient({
      address: `127.0.0.1:${rec.port}`,
      stepTimeoutMs: 150,
      backoff: { initialMs: 100, maxMs: 60_000 },
      healthProbe: false,
    });
    try {
      const [a, b] = [
        client.openConversation({ gate: CloudGate.OPEN, requestId: 'probe-a' }),
        client.openConversation({ gate: CloudGate.OPEN, requestId: 'probe-b' }),
      ];
      expect(await rejectionCode(a.next(new EdgeContext([1]).step()))).toBe('DEADLINE_EXCEEDED');
      await waitFor(() => client.backoff.state === 'half-open', 2_000, 'the delay to pass');
      const opens = rec.messages.filter((m) => m.open).length;
      const probe = a.next(new EdgeContext([1]).step()); // admitted synchronously: it is the probe
      const refused = await b.next(new EdgeContext([1]).step()).catch((e) => e);
      expect(refused).toBeInstanceOf(CircuitOpenError);
      expect(refused.message).toContain('a reconnection attempt is in progress');
      expect(await rejectionCode(probe)).toBe('DEADLINE_EXCEEDED');
      expect(rec.messages.filter((m) => m.open).length).toBe(opens + 1);
      expect(client.backoff.state).toBe('open');
      expect(client.backoff.consecutiveFailures).toBe(2);
      // (That this opening lasts twice as long is checked on an injected clock below.)
      expect(await b.next(new EdgeContext([1]).step()).catch((e) => e)).toBeInstanceOf(CircuitOpenError);
    } finally {
      rec.answer = [7];
      await client.close();
    }
  });
});

describe('a session that ends while a step is on its way', () => {
  /**
   * A shim that answers each stream's first step and ends the stream with `end` when the second arrives,
   * as a real shim does when it expires an idle session just as the edge sends (the two messages cross).
   */
  async function crossingShim(end: { code: number; message: string; expired: boolean }) {
    const streams: number[] = [];
    const server = new grpc.Server();
    const handlers: CloudRouterHandlers = {
      Score: (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: 'not this test shim' }),
      Describe: (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: 'not this test shim' }),
      Route: (call) => {
        let steps = 0;
        let context = 0;
        streams.push(0);
        call.on('data', (m: RouteRequest__Output) => {
          if (m.open) {
            context = m.open.contextIds.length;
            call.write({ opened: { sessionId: `s${streams.length}`, backend: 'crossing' } });
          }
          if (!m.step) return;
          context += m.step.ids.length;
          if (++steps === 2) {
            call.write({ end: { ...end, steps: 1 } });
            call.end();
            return;
          }
          context += 1;
          call.write({ step: { ids: [7], logprobs: [-0.5], contextLength: context } });
        });
        call.on('end', () => call.end());
        call.on('error', () => {});
      },
    };
    server.addService(cloudRouterService, handlers);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    return { port, streams, stop: () => server.forceShutdown() };
  }

  async function twoSteps(port: number) {
    const client = new GrpcCloudClient({ address: `127.0.0.1:${port}`, stepTimeoutMs: 2_000 });
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'crossing' });
    try {
      const edge = new EdgeContext([1]);
      edge.push((await conversation.next(edge.step())).tokens, 'llm');
      edge.push([9], 'slm');
      const second = await conversation.next(edge.step()).catch((e: unknown) => e);
      return { second, failures: client.backoff.consecutiveFailures, state: client.state() };
    } finally {
      await conversation.close();
      await client.close();
    }
  }

  test('an idle expiry that crossed the step: the step is sent again on a new stream and succeeds', async () => {
    const shim = await crossingShim({ code: grpc.status.DEADLINE_EXCEEDED, message: 'session idle for more than 60 ms', expired: true });
    try {
      const { second, failures, state } = await twoSteps(shim.port);
      expect(second).toMatchObject({ tokens: [7] });
      expect(shim.streams).toHaveLength(2);
      expect(failures).toBe(0);
      expect(state).not.toBe('circuit-open');
    } finally {
      shim.stop();
    }
  });

  test('the shim failing the step at its own deadline is the answer: no second try, and it counts against the circuit', async () => {
    const shim = await crossingShim({ code: grpc.status.DEADLINE_EXCEEDED, message: 'the backend did not answer within 300 ms', expired: false });
    try {
      const { second, failures } = await twoSteps(shim.port);
      expect(second).toMatchObject({ code: 'DEADLINE_EXCEEDED' });
      expect(shim.streams).toHaveLength(1);
      expect(failures).toBe(1);
    } finally {
      shim.stop();
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
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'lazy' });
      expect(client.state()).toBe('idle');
      expect(shim.store.count).toBe(0);
      await conversation.next(new EdgeContext([1]).step());
      expect(client.state()).toBe('ready');
      expect(shim.store.count).toBe(1);
      await conversation.close();
      expect(shim.store.count).toBe(0);
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('clients in one process share a connection unless each asks for its own', async () => {
    const shim = await startTestShim();
    const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: shim.port, delayMs: 0 });
    const connectionsFor = async (ownConnection: boolean) => {
      const clients = [0, 1, 2].map(() => new GrpcCloudClient({ address: proxy.address, ownConnection }));
      try {
        for (const [i, client] of clients.entries()) {
          const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `conn-${i}` });
          await conversation.next(new EdgeContext([1]).step());
          await conversation.close();
        }
        return proxy.connections();
      } finally {
        await Promise.all(clients.map((c) => c.close()));
        await waitFor(() => proxy.connections() === 0, 3_000, 'connections closed');
      }
    };
    try {
      expect(await connectionsFor(false)).toBe(1);
      expect(await connectionsFor(true)).toBe(3);
    } finally {
      await proxy.close();
      await shim.shutdown();
    }
  });

  test('the shim going away: UNAVAILABLE, the circuit opens at the third failure and refuses without trying; back, it is found without a step', async () => {
    let shim = await startTestShim();
    const port = shim.port;
    const client = new GrpcCloudClient({ address: shim.address, backoff: { initialMs: 400, maxMs: 400, failureThreshold: 3 }, stepTimeoutMs: 2_000 });
    try {
      const edge = new EdgeContext([1]);
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'restart' });
      edge.push((await conversation.next(edge.step())).tokens, 'llm');
      expect(client.state()).toBe('ready');
      await shim.shutdown();

      for (const failures of [1, 2, 3]) {
        const error = await conversation.next(edge.step()).catch((e) => e);
        expect(error.code).toBe('UNAVAILABLE');
        expect(error).not.toBeInstanceOf(CircuitOpenError); // each of these really tried the shim
        expect(client.backoff.consecutiveFailures).toBe(failures);
        expect(client.state()).toBe(failures < 3 ? 'unavailable' : 'circuit-open');
      }
      const refused = await conversation.next(edge.step()).catch((e) => e);
      expect(refused).toBeInstanceOf(CircuitOpenError);
      expect(client.backoff.consecutiveFailures).toBe(3);

      shim = await startTestShim({ port });
      // No step is sent: the health probe finds the shim on the breaker's schedule and closes the circuit.
      await waitFor(() => client.state() === 'ready', 10_000, 'the health probe to find the shim');
      expect(client.probe.probes).toBeGreaterThanOrEqual(1);
      expect(client.backoff.consecutiveFailures).toBe(0);
      const reply = await conversation.next(edge.step({ maxTokens: 2 }));
      expect(reply.tokens).toEqual(await greedyReference(model, edge.ids, 2));
      expect(reply.cachedTokens).toBe(0); // the new stream carried the whole context
      expect(client.backoff.consecutiveFailures).toBe(0);
      expect(client.state()).toBe('ready');
      await conversation.close();
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('a stream the shim expired between steps is replaced before the next step: no failure, no circuit', async () => {
    const shim = await startTestShim({ sessionIdleMs: 50 });
    const client = new GrpcCloudClient({ address: shim.address, backoff: { initialMs: 60_000, failureThreshold: 1 } });
    try {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'idle' });
      const edge = new EdgeContext([1]);
      edge.push((await conversation.next(edge.step())).tokens, 'llm');
      await waitFor(() => shim.store.count === 0, 3_000, 'the idle session to expire');
      // Wait for its final message to reach the session's reader (a private field: nothing public shows it).
      const reader = () => (conversation as unknown as { reader?: { buffered: number } }).reader;
      await waitFor(() => reader()?.buffered === 1, 3_000, 'the final message');
      const reply = await conversation.next(edge.step({ maxTokens: 2 }));
      expect(reply.tokens).toEqual(await greedyReference(model, edge.ids, 2));
      expect(reply.cachedTokens).toBe(0); // a new stream, carrying the whole context
      expect(client.backoff.consecutiveFailures).toBe(0);
      expect(client.state()).toBe('ready');
      await conversation.close();
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('when the edge’s context no longer holds what the shim returned, a new stream carries it whole', async () => {
    const shim = await startTestShim();
    const client = new GrpcCloudClient({ address: shim.address });
    try {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'diverge' });
      const edge = new EdgeContext([1, 403]);
      await conversation.next(edge.step({ maxTokens: 3 }));
      edge.push([261, 376], 'slm'); // the edge kept its own tokens instead
      const reply = await conversation.next(edge.step({ maxTokens: 2 }));
      expect(reply.tokens).toEqual(await greedyReference(model, edge.ids, 2));
      expect(reply.cachedTokens).toBe(0);
      await conversation.close();
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
      const conversations = [0, 1, 2].map((i) => client.openConversation({ gate: CloudGate.OPEN, requestId: `close-${i}` }));
      await Promise.all(conversations.map((s) => s.next(new EdgeContext([1]).step())));
      expect(shim.store.count).toBe(3);
      await client.close();
      await waitFor(() => shim.store.count === 0, 2_000, 'sessions freed');
      expect(await rejectionCode(conversations[0]!.next(new EdgeContext([1]).step()))).toBe('FAILED_PRECONDITION');
      expect(() => client.openConversation({ gate: CloudGate.OPEN, requestId: 'late' })).toThrow(/closed/);
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });
});

describe('circuit breaker (injected clock)', () => {
  /** A breaker on a clock the test moves; no jitter unless asked, so delays are exact. */
  function breaker(options: { failureThreshold?: number; jitter?: number; random?: () => number } = {}) {
    const clock = { now: 1_000 };
    const b = new CloudBackoff(
      { initialMs: 100, maxMs: 400, failureThreshold: options.failureThreshold, jitter: options.jitter ?? 0 },
      () => clock.now,
      options.random,
    );
    return { clock, b };
  }
  const refusal = (b: CloudBackoff) => {
    try {
      b.check();
    } catch (e) {
      expect(e).toBeInstanceOf(CircuitOpenError);
      return (e as Error).message;
    }
    return 'admitted';
  };

  test('closed for the first N-1 failures, open after N, half-open after the delay, closed by a successful probe', () => {
    const { clock, b } = breaker({ failureThreshold: 3 });
    for (const failures of [1, 2]) {
      b.failure();
      expect([b.state, b.open, b.consecutiveFailures]).toEqual(['closed', false, failures]);
      expect(refusal(b)).toBe('admitted');
    }
    b.failure();
    expect([b.state, b.open]).toEqual(['open', true]);
    expect(refusal(b)).toBe('cloud unavailable after 3 failed attempt(s); circuit open, next attempt in 100 ms');
    clock.now += 99;
    expect(refusal(b)).toBe('cloud unavailable after 3 failed attempt(s); circuit open, next attempt in 1 ms');
    clock.now += 1;
    expect([b.state, b.open]).toEqual(['half-open', false]);
    expect(refusal(b)).toBe('admitted'); // the probe
    expect([b.state, b.open]).toEqual(['half-open', true]);
    expect(refusal(b)).toBe('cloud unavailable after 3 failed attempt(s); a reconnection attempt is in progress');
    b.success();
    expect([b.state, b.open, b.consecutiveFailures]).toEqual(['closed', false, 0]);
    expect(refusal(b)).toBe('admitted');
    expect(refusal(b)).toBe('admitted');
  });

  test('steps on the wire together when the shim fails count once; a step sent after a failure counts again; a missed deadline opens at once', () => {
    const { b } = breaker({ failureThreshold: 3 });
    // Four steps in flight when the shim dies: one incident.
    const together = [b.mark(), b.mark(), b.mark(), b.mark()];
    for (const since of together) b.failure('error', since);
    expect([b.state, b.consecutiveFailures]).toEqual(['closed', 1]);
    // Sent after it came back: independent attempts, in a row.
    b.failure('error', b.mark());
    expect([b.state, b.consecutiveFailures]).toEqual(['closed', 2]);
    b.failure('error', b.mark());
    expect([b.state, b.consecutiveFailures]).toEqual(['open', 3]);
    // A step in flight that misses its deadline opens the circuit whenever it began.
    const fresh = breaker({ failureThreshold: 3 }).b;
    const early = fresh.mark();
    fresh.failure('error', fresh.mark());
    fresh.failure('deadline', early);
    expect(fresh.state).toBe('open');
  });

  test('the default threshold is 3', () => {
    const { b } = breaker();
    b.failure();
    b.failure();
    expect(b.state).toBe('closed');
    b.failure();
    expect(b.state).toBe('open');
  });

  test('a failed probe reopens at once; the delay doubles per opening up to the maximum; a success starts over', () => {
    const { clock, b } = breaker({ failureThreshold: 2 });
    b.failure();
    b.failure();
    for (const delay of [100, 200, 400, 400, 400]) {
      expect(refusal(b)).toBe(`cloud unavailable after ${b.consecutiveFailures} failed attempt(s); circuit open, next attempt in ${delay} ms`);
      clock.now += delay - 1;
      expect(b.state).toBe('open');
      clock.now += 1;
      expect(refusal(b)).toBe('admitted');
      b.failure();
    }
    expect(b.consecutiveFailures).toBe(7);
    clock.now += 400;
    expect(refusal(b)).toBe('admitted');
    b.success();
    b.failure();
    expect(b.state).toBe('closed'); // the count starts again at a success
    b.failure();
    expect(refusal(b)).toBe('cloud unavailable after 2 failed attempt(s); circuit open, next attempt in 100 ms');
  });

  test('a missed deadline opens the circuit at once, whatever the threshold', () => {
    const { b } = breaker({ failureThreshold: 5 });
    b.failure('deadline');
    expect(b.state).toBe('open');
    expect(refusal(b)).toBe('cloud unavailable after 1 failed attempt(s); circuit open, next attempt in 100 ms');
  });

  test('failures must be consecutive: a success in between resets the count', () => {
    const { b } = breaker({ failureThreshold: 3 });
    b.failure();
    b.failure();
    b.success();
    b.failure();
    b.failure();
    expect([b.state, b.consecutiveFailures]).toEqual(['closed', 2]);
  });

  test('late failures while open do not push the next attempt back', () => {
    const { clock, b } = breaker({ failureThreshold: 1 });
    b.failure();
    clock.now += 60;
    b.failure(); // a step that was already under way when the circuit opened
    b.failure('deadline');
    expect(refusal(b)).toBe('cloud unavailable after 3 failed attempt(s); circuit open, next attempt in 40 ms');
    clock.now += 40;
    expect(b.state).toBe('half-open');
  });

  test('an abandoned probe (cancelled) lets the next caller probe, without counting a failure', () => {
    const { clock, b } = breaker({ failureThreshold: 1 });
    b.failure();
    clock.now += 100;
    expect(refusal(b)).toBe('admitted');
    expect(refusal(b)).toMatch(/reconnection attempt is in progress/);
    b.abandon();
    expect([b.state, b.consecutiveFailures]).toEqual(['half-open', 1]);
    expect(refusal(b)).toBe('admitted');
  });

  test('jitter spreads each delay by ±jitter', () => {
    for (const [random, delay] of [
      [0, 80],
      [0.5, 100],
      [1, 120],
    ] as const) {
      const { b } = breaker({ failureThreshold: 1, jitter: 0.2, random: () => random });
      b.failure();
      expect(refusal(b)).toBe(`cloud unavailable after 1 failed attempt(s); circuit open, next attempt in ${delay} ms`);
    }
  });

  test('a threshold below 1 is refused', () => {
    expect(() => new CloudBackoff({ initialMs: 1, maxMs: 1, failureThreshold: 0 })).toThrow(/failureThreshold must be an integer ≥ 1, got 0/);
  });
});
