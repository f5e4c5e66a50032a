/**
 * Several shims behind nginx, and nginx standing in for SGLang's gateway, all real: Debian's nginx run by
 * NginxProcess with the shipped deploy/ configurations, two shims as child processes (the embedded demo
 * cloud pack, debug logs so each routed step is counted where it was served), the edge's runtime with its
 * trained router and gRPC cloud client in this process, and two SGLang fakes answering with the real model.
 * nginx missing fails these tests with the install hint (CI installs it: scripts/setup.sh).
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import { generateAll } from './helpers/generate-all.ts';
import { DEFAULT_LIMITS, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { loadRouter, type Router } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { CLOUD_ROUTER_SERVICE_NAME, HealthClient } from '../src/shared/grpc/proto.ts';
import { AppError } from '../src/shared/errors.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { GRPC_SHIMS_CONFIG, renderNginxConfig, SGLANG_AFFINITY_CONFIG } from '../src/tools/fleet/nginx-config.ts';
import { findNginx, NginxProcess } from '../src/tools/fleet/nginx-process.ts';
import { FakeSglang } from './helpers/cloud-fake-sglang.ts';
import { waitFor } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks, tinyStoriesParagraphs } from './helpers/demo-packs.ts';
import { freePort, ShimProcess } from './helpers/shim-process.ts';

/** Joint mode with a threshold at which the trained router sends most tokens to the cloud. */
const routed = (prompt: string): RawGenerationRequest => ({ prompt, mode: 'joint', threshold: 0.9, maxNewTokens: 48 });

let demo: Awaited<ReturnType<typeof ensureDemoPacks>>;
let prompts: string[];
/** nginx temp dirs that other runs on this machine hold: ours must come and go without adding to them. */
let nginxDirsBefore: string[];

beforeAll(async () => {
  findNginx();
  nginxDirsBefore = readdirSync(tmpdir()).filter((name) => name.startsWith('edge-router-nginx-'));
  demo = await ensureDemoPacks();
  prompts = (await tinyStoriesParagraphs(8)).map((p) => p.split(/\s+/).slice(0, 8).join(' '));
}, 120_000);

describe('rendering and starting nginx', () => {
  test('sets the marked listen and upstream lines and keeps everything else as shipped', async () => {
    const template = await Bun.file(GRPC_SHIMS_CONFIG).text();
    const text = renderNginxConfig(template, { listen: '127.0.0.1:7000', upstreams: ['10.0.0.1:50051', '10.0.0.2:50051', '10.0.0.3:50051'] });
    expect(
      text
        .split('\n')
        .filter((l) => /# @(listen|upstream)$/.test(l))
        .map((l) => l.trim()),
    ).toEqual([
      'server 10.0.0.1:50051 max_fails=1 fail_timeout=10s;  # @upstream',
      'server 10.0.0.2:50051 max_fails=1 fail_timeout=10s;  # @upstream',
      'server 10.0.0.3:50051 max_fails=1 fail_timeout=10s;  # @upstream',
      'listen 127.0.0.1:7000 http2;  # @listen',
    ]);
    const unmarked = (s: string) => s.split('\n').filter((l) => !/# @(listen|upstream)\s*$/.test(l));
    expect(unmarked(text)).toEqual(unmarked(template));
  });

  test('refuses what would not be a working configuration', async () => {
    const template = await Bun.file(SGLANG_AFFINITY_CONFIG).text();
    expect(() => renderNginxConfig(template, { listen: '127.0.0.1:7000', upstreams: [] })).toThrow('at least one upstream');
    expect(() => renderNginxConfig(template, { listen: '127.0.0.1:7000', upstreams: ['a b:1'] })).toThrow('host:port, got "a b:1"');
    expect(() => renderNginxConfig('events {}', { listen: '127.0.0.1:7000', upstreams: ['127.0.0.1:1'] })).toThrow('found 0 and 0');
  });

  test('nginx missing: a clear FAILED_PRECONDITION with the install hint', async () => {
    const error = await NginxProcess.start(GRPC_SHIMS_CONFIG, ['127.0.0.1:1'], { binary: '/nonexistent/nginx' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('FAILED_PRECONDITION');
    expect((error as AppError).message).toBe('nginx is not installed at /nonexistent/nginx (install nginx-light: scripts/setup.sh does)');
  });

  test('a configuration nginx refuses: UNAVAILABLE with nginx’s own message, and its temp dir removed', async () => {
    const shipped = await Bun.file(GRPC_SHIMS_CONFIG).text();
    const dir = await mkdtemp(join(tmpdir(), 'fleet-nginx-test-'));
    try {
      const template = join(dir, 'broken.conf');
      await Bun.write(template, shipped.replace('grpc_read_timeout 1h;', 'grpc_read_timeout forever;'));
      const error = await NginxProcess.start(template, ['127.0.0.1:1']).catch((e: unknown) => e);
      expect((error as AppError).code).toBe('UNAVAILABLE');
      expect((error as AppError).message).toMatch(/^nginx exited \(1\) at start:\n[^]*"grpc_read_timeout" directive invalid value/);
      expect(readdirSync(tmpdir()).filter((name) => name.startsWith('edge-router-nginx-'))).toEqual(nginxDirsBefore);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('an edge through nginx to two shims', () => {
  let edgeModel: DecoderModel;
  let router: Router;
  let tokenizer: TextTokenizer;
  let shims: ShimProcess[] = [];
  let ports: number[] = [];
  let nginx: NginxProcess;
  let cloud: GrpcCloudClient;
  let runtime: EdgeRuntime;

  beforeAll(async () => {
    edgeModel = await DecoderModel.load(loadModelPack(demo.edgePack));
    router = await loadRouter(demo.routerPack);
    tokenizer = await TextTokenizer.fromPack(demo.edgePack);
    ports = [await freePort(), await freePort()];
    shims = await Promise.all(ports.map((port) => ShimProcess.start(port, demo.cloudPack, { logLevel: 'debug' })));
    nginx = await NginxProcess.start(
      GRPC_SHIMS_CONFIG,
      ports.map((port) => `127.0.0.1:${port}`),
    );
    cloud = new GrpcCloudClient({ address: nginx.address, stepTimeoutMs: 5_000, backoff: { initialMs: 100, maxMs: 400, failureThreshold: 3 } });
    runtime = new EdgeRuntime({ edgeModel, router, tokenizer, cloud }, { ...DEFAULT_LIMITS, maxConcurrent: 4 });
  }, 120_000);

  afterAll(async () => {
    await runtime?.shutdown();
    await nginx?.stop();
    await Promise.all(shims.map((shim) => shim.kill()));
    await router?.release();
    await edgeModel?.release();
  });

  test('generations succeed and their routed steps are spread over both shims', async () => {
    let routedTokens = 0;
    for (const prompt of prompts.slice(0, 6)) {
      const { tokens, done } = await generateAll(runtime, routed(prompt));
      expect(['length', 'eos']).toContain(done.finishReason);
      expect(bySource(tokens, 'fallback')).toEqual([]);
      routedTokens += bySource(tokens, 'llm').length;
    }
    // Each shim logs a step once it answered it, before the edge sees the token; the pipe may lag a little.
    await waitFor(() => shims.reduce((sum, shim) => sum + steps(shim).length, 0) === routedTokens, 5_000, 'the shims to log every step');
    const perShim = shims.map((shim) => steps(shim).length);
    const sessions = shims.map((shim) => shim.logRecords().filter((r) => r.msg === 'session opened').length);
    console.log(`routed steps per shim ${perShim.join(' / ')} of ${routedTokens}; generations per shim ${sessions.join(' / ')}`);
    expect(routedTokens).toBeGreaterThan(6 * 10);
    for (const count of perShim) expect(count).toBeGreaterThan(0);
    // Round robin over streams: each shim served whole generations, three of the six each.
    expect(sessions).toEqual([3, 3]);
  }, 120_000);

  test('one shim killed mid-generation: it completes with a few fallback tokens; new ones go to the other within 2 s', async () => {
    const stepsBefore = shims.map((shim) => steps(shim).length);
    let killed: number | undefined;
    const { tokens, done } = await generateAll(runtime, routed(prompts[6]!), async (_token, seen) => {
      if (killed !== undefined || bySource(seen, 'llm').length !== 3) return;
      // The shim holding this generation's stream: the one with a session opened and not closed.
      await waitFor(() => shims.some(holdsSession), 5_000, 'a shim to log the open session');
      killed = shims.findIndex(holdsSession);
      await shims[killed]!.kill();
    });
    expect(killed).toBeDefined();
    const survivor = shims[1 - killed!]!;
    expect(['length', 'eos']).toContain(done.finishReason);
    expect(done.text).toBe(tokens.map((t) => t.text).join(''));
    // The killed shim had served this generation's first three routed steps; the survivor opened a session
    // for the same request with the whole context (prompt and every token so far), and served the rest.
    const killedSession = openSessions(shims[killed!]!)[0]!;
    expect(steps(shims[killed!]!).filter((r) => r.session === killedSession.session)).toHaveLength(3);
    const reopened = survivor.logRecords().filter((r) => r.msg === 'session opened' && r.requestId === killedSession.requestId);
    expect(reopened).toHaveLength(1);
    expect(reopened[0]!.context as number).toBeGreaterThan((killedSession.context as number) + 3);
    const fallback = bySource(tokens, 'fallback');
    console.log(`after the kill: ${fallback.length} fallback tokens (${fallback.map((t) => t.cloudError).join('; ')})`);
    expect(fallback.length).toBeLessThanOrEqual(3);
    // The generation went on routing: the edge reopened its stream with the whole context, on the survivor.
    const llmAfterKill = bySource(tokens, 'llm').length - 3;
    expect(llmAfterKill).toBeGreaterThan(0);
    await waitFor(() => steps(survivor).length >= stepsBefore[1 - killed!]! + llmAfterKill, 5_000, 'the survivor to log its steps');

    for (const prompt of prompts.slice(0, 2)) {
      const started = performance.now();
      let firstRoutedMs: number | undefined;
      const next = await generateAll(runtime, routed(prompt), async (token) => {
        if (token.source === 'llm') firstRoutedMs ??= performance.now() - started;
      });
      console.log(`a new generation's first routed step after ${firstRoutedMs?.toFixed(0)} ms`);
      expect(firstRoutedMs).toBeLessThan(2_000);
      expect(bySource(next.tokens, 'fallback')).toEqual([]);
      expect(['length', 'eos']).toContain(next.done.finishReason);
    }
    expect(runtime.cloudState()).toBe('ready');
  }, 120_000);

  test('the gRPC health check passes through the balancer: SERVING while one shim is still up', async () => {
    // After the previous test one shim is dead: nginx skips it (or tries it, fails, and moves on).
    expect(shims.filter((shim) => shim.child.exitCode === null && shim.child.signalCode === null)).toHaveLength(1);
    const health = new HealthClient(nginx.address, grpc.credentials.createInsecure());
    try {
      for (const service of ['', CLOUD_ROUTER_SERVICE_NAME, '', CLOUD_ROUTER_SERVICE_NAME]) {
        const status = await new Promise<string | undefined>((resolve, reject) =>
          health.Check({ service }, { deadline: Date.now() + 5_000 }, (e, reply) => (e ? reject(e) : resolve(reply?.status))),
        );
        expect(status).toBe('SERVING');
      }
    } finally {
      health.close();
    }
  }, 30_000);

  test('four generations running when a shim dies at any moment: all complete, each goes on routing', async () => {
    // The dead shim comes back on its port; a fresh nginx, since the old one skips it for fail_timeout.
    const dead = shims.findIndex((shim) => shim.child.exitCode !== null || shim.child.signalCode !== null);
    shims[dead] = await ShimProcess.start(ports[dead]!, demo.cloudPack, { logLevel: 'debug' });
    const balancer = await NginxProcess.start(
      GRPC_SHIMS_CONFIG,
      ports.map((port) => `127.0.0.1:${port}`),
    );
    const fleetCloud = new GrpcCloudClient({ address: balancer.address, stepTimeoutMs: 5_000, backoff: { initialMs: 100, maxMs: 400 } });
    const fleetEdge = new EdgeRuntime({ edgeModel, router, tokenizer, cloud: fleetCloud }, { ...DEFAULT_LIMITS, maxConcurrent: 4 });
    const sessionsOnSurvivor = () => shims[1]!.logRecords().filter((r) => r.msg === 'session opened').length;
    const survivorBefore = sessionsOnSurvivor();
    try {
      let routedSoFar = 0;
      const tokensAtKill: number[] = [];
      let kill: Promise<void> | undefined;
      const runs = prompts.slice(0, 4).map((prompt, i) =>
        generateAll(fleetEdge, { ...routed(prompt), maxNewTokens: 64 }, async (token, seen) => {
          if (token.source === 'llm') routedSoFar++;
          // Not awaited: the other generations' steps stay on the wire while the shim dies.
          if (!kill && routedSoFar >= 12) {
            kill = shims[0]!.kill();
            tokensAtKill[i] = seen.length;
          }
        }),
      );
      const results = await Promise.all(runs);
      await kill;
      expect(kill).toBeDefined();
      for (const { tokens, done } of results) {
        expect(['length', 'eos']).toContain(done.finishReason);
        expect(done.text).toBe(tokens.map((t) => t.text).join(''));
        const fallback = bySource(tokens, 'fallback');
        if (fallback.length) console.log(`fallback tokens: ${fallback.map((t) => t.cloudError).join('; ')}`);
        expect(fallback.length).toBeLessThanOrEqual(3);
        // Routed tokens in the last half: every generation went on routing after the kill.
        expect(bySource(tokens.slice(tokens.length / 2), 'llm').length).toBeGreaterThan(0);
      }
      // Every generation ended on the survivor: a session there for each (the pipe may lag a little).
      await waitFor(() => sessionsOnSurvivor() - survivorBefore >= 4, 5_000, 'the survivor to log a session per generation');
    } finally {
      await fleetEdge.shutdown();
      await balancer.stop();
    }
  }, 120_000);
});

describe('nginx in front of two SGLang fakes, hashing X-SMG-Routing-Key', () => {
  let cloudModel: DecoderModel;
  let fakes: FakeSglang[] = [];
  let nginx: NginxProcess;
  let contexts: number[][];

  beforeAll(async () => {
    cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
    const tokenizer = await TextTokenizer.fromPack(demo.cloudPack);
    fakes = [new FakeSglang(cloudModel, tokenizer), new FakeSglang(cloudModel, tokenizer)];
    nginx = await NginxProcess.start(
      SGLANG_AFFINITY_CONFIG,
      fakes.map((fake) => new URL(fake.url).host),
    );
    contexts = prompts.map((prompt) => tokenizer.encode(prompt, { addBos: true }));
  }, 120_000);

  afterAll(async () => {
    await nginx?.stop();
    await Promise.all(fakes.map((fake) => fake.stop()));
    await cloudModel?.release();
  });

  /** One greedy token for `inputIds`, sent through nginx with `key` (no header when undefined). */
  async function generate(inputIds: number[], rid: string, key: string | undefined) {
    const response = await fetch(`http://${nginx.address}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'X-SMG-Routing-Key': key }) },
      body: JSON.stringify({ input_ids: inputIds, rid, sampling_params: { max_new_tokens: 1, temperature: 0 } }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(response.status).toBe(200);
    return (await response.json()) as { output_ids: number[]; meta_info: { cached_tokens: number } };
  }

  /** Index of the fake that received the request `rid`. */
  const servedBy = (rid: string) => fakes.findIndex((fake) => fake.requests.some((r) => r.rid === rid));

  test('every step of one key lands on one fake, whose cache then holds the context; keys spread over both', async () => {
    const workerOf = new Map<string, number>();
    for (let k = 0; k < 32; k++) {
      const key = `generation-${k}`;
      let ids = contexts[k % contexts.length]!;
      const workers = new Set<number>();
      for (let step = 0; step < 4; step++) {
        const rid = `${key}/${step}`;
        const reply = await generate(ids, rid, key);
        workers.add(servedBy(rid));
        // From the second step on, the worker has seen the whole context but the newest token.
        if (step > 0) expect(reply.meta_info.cached_tokens).toBe(ids.length - 1);
        ids = [...ids, ...reply.output_ids];
      }
      expect([...workers]).toHaveLength(1);
      workerOf.set(key, [...workers][0]!);
    }
    const perFake = fakes.map((_, i) => [...workerOf.values()].filter((w) => w === i).length);
    console.log(`keys per fake: ${perFake.join(' / ')}`);
    for (const count of perFake) expect(count).toBeGreaterThan(0);
  }, 60_000);

  test('without the header the key is empty and nginx falls back to round robin: requests scatter over both', async () => {
    const served = new Set<number>();
    for (let i = 0; i < 8; i++) {
      const rid = `no-key/${i}`;
      await generate(contexts[i % contexts.length]!, rid, undefined);
      served.add(servedBy(rid));
    }
    expect(served.size).toBe(2);
  }, 60_000);
});

const bySource = (tokens: TokenEvent[], source: TokenEvent['source']) => tokens.filter((t) => t.source === source);

/** The routed steps a shim answered, from its debug log. */
const steps = (shim: ShimProcess) => shim.logRecords().filter((r) => r.msg === 'step');

/** The 'session opened' records of the sessions whose stream is still open on `shim`. */
function openSessions(shim: ShimProcess): Record<string, unknown>[] {
  const records = shim.logRecords();
  const closed = new Set(records.filter((r) => r.msg === 'session closed').map((r) => r.session));
  return records.filter((r) => r.msg === 'session opened' && !closed.has(r.session));
}

const holdsSession = (shim: ShimProcess) => openSessions(shim).length > 0;
