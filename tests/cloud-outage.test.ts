/**
 * Cloud outages seen from the edge, end to end: the real edge pack, trained router and gRPC cloud client
 * in this process, the shim as a real child process (`bun src/cloud/main.ts`) that the test SIGKILLs in
 * the middle of a generation and starts again on the same port; a shim whose backend hangs past the
 * deadline; and an address where nothing listens. In every case the generation runs to its end on the
 * edge's own tokens (`fallback` where the router wanted the cloud), the page shows the cloud's state, the
 * circuit keeps the edge from waiting on the cloud token after token, and the edge routes again once the
 * shim is back.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Backend, BackendSequence } from '../src/cloud/backends/backend.ts';
import { createBackend } from '../src/cloud/backends/create-backend.ts';
import { shimConfig } from '../src/cloud/config.ts';
import type { TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import { generateAll } from './helpers/generate-all.ts';
import { DEFAULT_LIMITS, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { GrpcCloudClient, type GrpcCloudClientOptions } from '../src/edge/cloud/grpc-cloud-client.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { loadRouter, type Router } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { argmax } from '../src/shared/model/logits.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { EdgeContext, rejectionCode, startTestShim, waitFor } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { freePort, ShimProcess } from './helpers/shim-process.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

const PROMPT = 'Once upon a time, there was a little dog';
/** High enough that the trained router sends most tokens to the cloud. */
const ROUTED: RawGenerationRequest = { prompt: PROMPT, mode: 'joint', threshold: 0.9, maxNewTokens: 64 };
/** What the breaker says when it refuses a step without trying the shim. */
const REFUSED = /circuit open|reconnection attempt is in progress/;

let demo: Awaited<ReturnType<typeof ensureDemoPacks>>;
let edgeModel: DecoderModel;
let router: Router;
let tokenizer: TextTokenizer;

beforeAll(async () => {
  demo = await ensureDemoPacks();
  edgeModel = await DecoderModel.load(loadModelPack(demo.edgePack));
  router = await loadRouter(demo.routerPack);
  tokenizer = await TextTokenizer.fromPack(demo.edgePack);
}, 60_000);

afterAll(async () => {
  await router.release();
  await edgeModel.release();
});

/** An edge runtime (what the page and the gRPC service run on) around `cloud`, and its web app. */
function startEdge(cloud: GrpcCloudClient) {
  const runtime = new EdgeRuntime({ edgeModel, router, tokenizer, cloud }, { ...DEFAULT_LIMITS, maxConcurrent: 2 });
  const app = createEdgeApp(runtime, { accessToken: undefined, maxBodyBytes: 64 * 1024 });
  return {
    runtime,
    /** The cloud state as the page's fragment shows it. */
    async pageState(): Promise<string> {
      const html = await (await app.request('/fragments/cloud-state')).text();
      return /cloud: ([a-z-]+)/.exec(html)?.[1] ?? `unparsed: ${html}`;
    },
  };
}

/** Plain greedy decoding with the edge pack: what a generation on the edge's own tokens must produce. */
async function edgeGreedy(count: number): Promise<number[]> {
  const sequence = edgeModel.newSequence();
  try {
    let { logits } = await sequence.append(tokenizer.encode(PROMPT, { addBos: true }));
    const ids: number[] = [];
    while (ids.length < count) {
      const best = argmax(logits);
      if (edgeModel.pack.eosTokenIds.includes(best)) break;
      ids.push(best);
      ({ logits } = await sequence.append([best]));
    }
    return ids;
  } finally {
    sequence.dispose();
  }
}

/**
 * The embedded backend, but every step hangs (until the shim aborts it at its deadline) while `hang` is set:
 * a cloud that is reachable and slow past the deadline. Counts the steps it was asked for.
 */
class HangingBackend implements Backend {
  hang = false;
  steps = 0;

  constructor(private readonly inner: Backend) {}

  get info() {
    return this.inner.info;
  }

  openSequence(sessionId: string): BackendSequence {
    const session = this.inner.openSequence(sessionId);
    return {
      step: (request) => {
        this.steps++;
        if (!this.hang) return session.step(request);
        return new Promise((_, reject) => {
          if (request.signal.aborted) reject(request.signal.reason);
          request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true });
        });
      },
      dispose: () => session.dispose(),
    };
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

const bySource = (tokens: TokenEvent[], source: TokenEvent['source']) => tokens.filter((t) => t.source === source);

describe('the shim dies mid-generation and comes back', () => {
  test('the generation finishes on edge tokens, the page shows the outage, and later generations route again', async () => {
    const port = await freePort();
    let shim = await ShimProcess.start(port, demo.cloudPack);
    const cloud = new GrpcCloudClient({ address: `127.0.0.1:${port}`, stepTimeoutMs: 10_000, backoff: { initialMs: 200, maxMs: 800, failureThreshold: 3 } });
    const edge = startEdge(cloud);
    try {
      const expectedIds = await edgeGreedy(ROUTED.maxNewTokens as number);
      let killedAfter = -1;
      const outage = await generateAll(edge.runtime, ROUTED, async (token, tokens) => {
        if (killedAfter < 0 && bySource(tokens, 'llm').length === 3) {
          await shim.kill();
          killedAfter = token.index;
        }
      });
      expect(killedAfter).toBeGreaterThanOrEqual(0);
      expect(['length', 'eos']).toContain(outage.done.finishReason);
      const before = outage.tokens.slice(0, killedAfter + 1);
      const after = outage.tokens.slice(killedAfter + 1);
      expect(bySource(before, 'llm')).toHaveLength(3);
      expect(bySource(before, 'fallback')).toEqual([]);
      // After the kill nothing comes from the cloud; where the router wanted it the edge decided.
      expect(after.every((t) => t.source === 'fallback' || t.source === 'slm')).toBe(true);
      const fallback = bySource(after, 'fallback');
      expect(fallback.length).toBeGreaterThanOrEqual(3);
      for (const t of fallback) expect(t.score!).toBeLessThan(0.9);
      // The first routed tokens after the kill really tried the shim; once three had failed the circuit
      // refused the next ones without trying.
      expect(fallback.slice(0, 3).map((t) => REFUSED.test(t.cloudError!))).toEqual([false, false, false]);
      expect(fallback.some((t) => REFUSED.test(t.cloudError!))).toBe(true);
      expect(outage.done.metrics.fallback).toBe(fallback.length);
      expect(outage.done.text).toBe(outage.tokens.map((t) => t.text).join(''));

      const shown = await edge.pageState();
      expect(['unavailable', 'circuit-open']).toContain(shown);
      expect(['unavailable', 'circuit-open']).toContain(edge.runtime.cloudState());

      // While the shim is down, generations still complete on the edge alone, token for token small_only.
      const alone = await generateAll(edge.runtime, ROUTED);
      expect(alone.tokens.map((t) => t.id)).toEqual(expectedIds);
      expect(bySource(alone.tokens, 'llm')).toEqual([]);

      shim = await ShimProcess.start(port, demo.cloudPack);
      let routedAgain: Awaited<ReturnType<typeof generateAll>> | undefined;
      for (let attempt = 0; attempt < 40 && !routedAgain; attempt++) {
        // Bounded: the delay is at most 800 ms (+20 % jitter) per opening.
        await waitFor(() => edge.runtime.cloudState() !== 'circuit-open', 5_000, 'the circuit to let a probe through');
        const run = await generateAll(edge.runtime, ROUTED);
        expect(['length', 'eos']).toContain(run.done.finishReason);
        if (bySource(run.tokens, 'llm').length > 0) routedAgain = run;
      }
      expect(routedAgain).toBeDefined();
      expect(edge.runtime.cloudState()).toBe('ready');
      expect(await edge.pageState()).toBe('ready');
      expect(cloud.backoff.consecutiveFailures).toBe(0);

      // Reconnected for good: a fresh generation routes every token the router sends to the cloud.
      const next = await generateAll(edge.runtime, ROUTED);
      expect(bySource(next.tokens, 'fallback')).toEqual([]);
      expect(bySource(next.tokens, 'llm').length).toBeGreaterThan(0);
    } finally {
      await edge.runtime.shutdown();
      await shim.kill();
    }
  }, 120_000);
});

describe('a shim slow past the deadline', () => {
  test('one routed step waits its deadline, the circuit opens at once, the rest of the generation is the edge’s', async () => {
    const backend = new HangingBackend(await createBackend(shimConfig({ modelPack: demo.cloudPack }), undefined));
    const shim = await startTestShim({}, { backend });
    const cloud = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 300, backoff: { initialMs: 60_000, failureThreshold: 3 } });
    const edge = startEdge(cloud);
    try {
      const { tokens, done } = await generateAll(edge.runtime, ROUTED, async (_token, seen) => {
        if (bySource(seen, 'llm').length === 2) backend.hang = true;
      });
      expect(done.finishReason).toBe('length');
      expect(bySource(tokens, 'llm')).toHaveLength(2);
      const fallback = bySource(tokens, 'fallback');
      expect(fallback.length).toBeGreaterThan(3);
      // Exactly one step went to the backend and hung; every later routed token was refused at once.
      expect(backend.steps).toBe(3);
      expect(fallback[0]!.cloudError).not.toMatch(REFUSED);
      // The client's timer or the shim's (it takes the edge's deadline as its own), whichever fired first.
      expect(fallback[0]!.cloudError).toMatch(/did not answer within 300 ms$/);
      for (const t of fallback.slice(1)) expect(t.cloudError).toMatch(/circuit open, next attempt in/);
      expect(edge.runtime.cloudState()).toBe('circuit-open');
      expect(await edge.pageState()).toBe('circuit-open');
    } finally {
      await edge.runtime.shutdown();
      await shim.shutdown();
    }
  }, 60_000);

  test('a step the shim ends at its own deadline is not sent again: the edge waits one deadline, not two', async () => {
    const backend = new HangingBackend(await createBackend(shimConfig({ modelPack: demo.cloudPack }), undefined));
    // The shim's deadline (150 ms) ends the step before the client's (10 s): its final message answers the step.
    const shim = await startTestShim({ backendTimeoutMs: 150 }, { backend });
    const cloud = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 10_000, backoff: { initialMs: 60_000 } });
    try {
      const conversation = cloud.openConversation({ gate: CloudGate.OPEN, requestId: 'shim-deadline' });
      const context = new EdgeContext([1]);
      context.push((await conversation.next(context.step())).tokens, 'llm');
      backend.hang = true;
      expect(await rejectionCode(conversation.next(context.step()))).toBe('DEADLINE_EXCEEDED');
      expect(backend.steps).toBe(2);
      expect(cloud.backoff.state).toBe('open');
      await conversation.close();
    } finally {
      await cloud.close();
      await shim.shutdown();
    }
  }, 60_000);
});

describe('an unreachable shim', () => {
  test('three attempts fail fast, then the circuit refuses without trying; the generation is the edge’s alone', async () => {
    const port = await freePort();
    // A deadline of a minute: a generation that waited it even once per token would time the test out.
    const options: GrpcCloudClientOptions = { address: `127.0.0.1:${port}`, stepTimeoutMs: 60_000, backoff: { initialMs: 60_000, failureThreshold: 3 } };
    const cloud = new GrpcCloudClient(options);
    const edge = startEdge(cloud);
    try {
      const { tokens, done } = await generateAll(edge.runtime, ROUTED);
      expect(done.finishReason).toBe('length');
      expect(tokens.map((t) => t.id)).toEqual(await edgeGreedy(ROUTED.maxNewTokens as number));
      const fallback = bySource(tokens, 'fallback');
      expect(fallback.length).toBeGreaterThan(10);
      expect(bySource(tokens, 'llm')).toEqual([]);
      const attempts = fallback.filter((t) => !REFUSED.test(t.cloudError!));
      expect(attempts).toEqual(fallback.slice(0, 3));
      for (const t of attempts) expect(t.cloudError).not.toMatch(/within 60000 ms/);
      for (const t of fallback.slice(3)) expect(t.cloudError).toMatch(/^cloud unavailable after 3 failed attempt\(s\); circuit open, next attempt in \d+ ms$/);
      expect(cloud.backoff.consecutiveFailures).toBe(3);
      expect(edge.runtime.cloudState()).toBe('circuit-open');
      expect(await edge.pageState()).toBe('circuit-open');
    } finally {
      await edge.runtime.shutdown();
    }
  }, 30_000);
});
