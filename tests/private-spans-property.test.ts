/**
 * The privacy proof (issue #49): over thousands of seeded prompts with private values (marked, or found by
 * the detector the request asks for), in joint and
 * llm_only mode with route spans, speculation (conditional steps included), the prompt and decided tokens
 * sent ahead (a quarter of the cases) and sampling, no private
 * value's text reaches the cloud: not in any context the edge's conversation sends, not in any request the
 * shim's SGLang backend receives (input ids and every other field), not in the shim's logs at debug level.
 * The user still reads the values: no placeholder of the generation's is left in the text. And a
 * generation whose pseudonymiser holds no value is byte-identical to one without it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { interceptSteps, type CloudClient, type CloudStepRequest } from '../src/edge/cloud/cloud-client.ts';
import type { CloudPrefillMode } from '../src/edge/loop/edge-engine.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { generate, type DoneEvent, type LoopRequest } from '../src/edge/loop/decoder-loop.ts';
import { PrivateDetector } from '../src/edge/privacy/private-detect.ts';
import { privateValuesFor } from '../src/edge/privacy/private-request.ts';
import { PrivateValues } from '../src/edge/privacy/private-values.ts';
import { parseGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { loadCloudModel, startTestShim } from './helpers/cloud-fixture.ts';
import { FakeSglang } from './helpers/cloud-fake-sglang.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { heldOutStories, privateCase, type PrivateCase } from './helpers/private-cases.ts';

/** Cases through the shim; PRIVACY_CASES raises it for a longer soak. */
const CASES = Number(process.env.PRIVACY_CASES ?? 2000);

let edge: DecoderModel;
let cloudModel: DecoderModel;
let tokenizer: TextTokenizer;
let sglang: FakeSglang;
let shim: ShimServer;
let client: GrpcCloudClient;
const shimLog: string[] = [];
let stories: string[];
/** Extends the loop asked the conversation underneath to send, over all cases. */
let extendsAsked = 0;

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  edge = await DecoderModel.load(loadModelPack(demo.edgePack));
  tokenizer = await TextTokenizer.fromPack(demo.edgePack);
  ({ model: cloudModel } = await loadCloudModel());
  sglang = new FakeSglang(cloudModel, tokenizer);
  shim = await startTestShim({ backend: 'sglang', backendUrl: sglang.url }, { log: createLogger('shim', 'debug', (line) => void shimLog.push(line)) });
  client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 30_000 });
  stories = heldOutStories();
}, 60_000);

afterAll(async () => {
  await client.close();
  await shim.shutdown();
  await sglang.stop();
  await edge.release();
  await cloudModel.release();
});

/**
 * Runs one case; every context the conversation underneath is asked to send (a step's, and with the prompt
 * sent ahead, the open's and each extend's) is kept in `sent`.
 */
async function run(
  c: PrivateCase,
  cloud: CloudClient,
  privateValues: PrivateValues | undefined,
  sent: number[][],
  cloudPrefill: CloudPrefillMode = 'lazy',
): Promise<{ done: DoneEvent; ids: number[] }> {
  const steps = interceptSteps(cloud, (request, next) => {
    sent.push([...request.context]);
    return next(request);
  });
  const record = (send: ((request: CloudStepRequest) => void) | undefined, count: () => void) =>
    send &&
    ((request: CloudStepRequest) => {
      sent.push([...request.context]);
      count();
      send(request);
    });
  const recording: CloudClient = {
    ...steps,
    openConversation(options) {
      const conversation = steps.openConversation(options);
      const prefill = record(conversation.prefill, () => {});
      return { ...conversation, prefill, extend: record(conversation.extend, () => extendsAsked++) };
    },
  };
  const engine = {
    edgeModel: edge,
    router: new TopProbabilityScorer(),
    tokenizer,
    cloud: recording,
    speculation: { depth: 4 },
    cloudPrefill: { mode: cloudPrefill },
  };
  const request: LoopRequest = parseGenerationRequest({ prompt: c.prompt, ...c.settings });
  if (privateValues) request.privateValues = privateValues;
  const ids: number[] = [];
  for await (const event of generate(engine, request)) {
    if (event.type === 'done') return { done: event, ids };
    ids.push(event.id);
  }
  throw new Error('no done event');
}

describe('no private value reaches the cloud', () => {
  test(`${CASES} seeded cases through a shim over the SGLang stand-in: not in the steps, the backend's requests or the shim's logs`, async () => {
    const leaks: string[] = [];
    let routed = 0;
    let placeholders = 0;
    let withheld = 0;
    const detector = PrivateDetector.create([], []);
    for (let seed = Number(process.env.PRIVACY_FROM ?? 0); seed < CASES; seed++) {
      if (process.env.PRIVACY_TRACE) console.error('seed', seed);
      const c = privateCase(seed, stories);
      const request = parseGenerationRequest({ prompt: c.prompt, privateSpans: c.spans, privateDetect: c.detect });
      const values = privateValuesFor(request, detector)!;
      // Marked or detected, every inserted entity is a value.
      expect(values.list.map((v) => v.text).sort()).toEqual([...c.values].sort());
      const sent: number[][] = [];
      const requestsBefore = sglang.requests.length;
      const logBefore = shimLog.length;
      // Every fourth case sends its prompt ahead, and the tokens the edge decides after it as extends.
      const { done } = await run(c, client, values, sent, seed % 4 === 0 ? 'eager' : 'lazy');
      routed += done.metrics.routed;
      placeholders += done.metrics.cloud.placeholders;
      withheld += done.metrics.cloud.withheldSteps;
      const seen = [
        ...sent.map((ids) => tokenizer.decode(ids)),
        ...sglang.requests.slice(requestsBefore).map((body) => JSON.stringify(body) + tokenizer.decode((body.input_ids as number[] | undefined) ?? [])),
        ...shimLog.slice(logBefore),
        done.cloudText,
      ];
      for (const value of c.values) if (seen.some((text) => text.includes(value))) leaks.push(`seed ${seed}: ${JSON.stringify(value)}`);
      // The user reads the values: every placeholder the cloud wrote was put back.
      for (const { placeholder } of values.list) if (done.text.includes(placeholder)) leaks.push(`seed ${seed}: ${placeholder} left in the output`);
    }
    expect(leaks).toEqual([]);
    // The cases exercised what they claim to: routing, placeholders on the wire, positions kept home.
    expect(routed).toBeGreaterThan(CASES * 2);
    expect(placeholders).toBeGreaterThan(CASES);
    expect(withheld).toBeGreaterThan(0);
    expect(sglang.requests.length).toBeGreaterThan(CASES);
    expect(extendsAsked).toBeGreaterThan(CASES / 4);
  }, 900_000);

  test('the checks see a leak when there is one: the same cases without the pseudonymiser send the values', async () => {
    let leaked = 0;
    for (let seed = 0; seed < 10; seed++) {
      const c = privateCase(seed, stories);
      const sent: number[][] = [];
      await run({ ...c, settings: { ...c.settings, mode: 'llm_only' } }, client, undefined, sent);
      if (c.values.some((value) => sent.some((ids) => tokenizer.decode(ids).includes(value)))) leaked++;
    }
    expect(leaked).toBe(10);
  }, 60_000);

  test('with a pseudonymiser that holds no value, every generation is byte-identical to one without it', async () => {
    for (let seed = 0; seed < 100; seed++) {
      const c = privateCase(seed, stories);
      const plain = await run(c, client, undefined, []);
      const wrapped = await run(c, client, PrivateValues.of([], c.prompt), []);
      expect({ seed, ids: wrapped.ids, text: wrapped.done.text }).toEqual({ seed, ids: plain.ids, text: plain.done.text });
      expect(wrapped.done.cloudText).toBe(plain.done.cloudText);
    }
  }, 300_000);
});
