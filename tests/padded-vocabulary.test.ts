/**
 * Embeddings padded beyond the tokenizer (Qwen2.5-0.5B has 151,936 rows, the 7B and 32B 152,064, over one
 * 151,669-token tokenizer): a pair padded differently is a valid routing pair, teacher forcing reads each
 * model's logits at its own row width and takes top-1 over the ids both have, and the shim serving a
 * padded model never answers with a padding row. The padded model here is built so that its padding
 * rows would win any argmax they took part in.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { readLlama2cCheckpoint } from '../src/tools/models/llama2c-checkpoint.ts';
import { writeDecoderPack } from '../src/tools/models/pack-writer.ts';
import { checkSameVocabulary, teacherForcePacks } from '../src/tools/lab/teacher-forcing.ts';
import { EdgeContext, startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks, tinyStoriesParagraphs } from './helpers/demo-packs.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

const PADDING = 64;
const work = mkdtempSync(join(tmpdir(), 'padded-pack-'));
let padded: string;

beforeAll(async () => {
  const demo = await ensureDemoPacks();
  // The cloud model with PADDING extra embedding rows (tied, so extra logits too), built to win any
  // argmax they take part in: ±100 × token 0's row, one of which scores far above every real token.
  const { spec, weights } = readLlama2cCheckpoint(demo.checkpoint);
  const d = spec.hiddenSize;
  const embed = new Float32Array((spec.vocabSize + PADDING) * d);
  embed.set(weights.embed);
  for (let r = 0; r < PADDING; r++) {
    for (let j = 0; j < d; j++) embed[(spec.vocabSize + r) * d + j] = (r % 2 ? -100 : 100) * weights.embed[j]!;
  }
  padded = join(work, 'stories260k-padded');
  await writeDecoderPack(padded, {
    spec: { ...spec, vocabSize: spec.vocabSize + PADDING },
    weights: { ...weights, embed },
    graph: { head: 'gemm', hiddenStatesOutput: true },
    tokenizerJson: JSON.parse(readFileSync(join(demo.cloudPack, 'tokenizer.json'), 'utf8')),
    tokenizerConfig: JSON.parse(readFileSync(join(demo.cloudPack, 'tokenizer_config.json'), 'utf8')),
    externalData: false,
    source: { test: 'padded' },
  });
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

test('the same tokenizer with more embedding rows passes the vocabulary check (another tokenizer fails it: router-cli.test.ts)', async () => {
  const demo = await ensureDemoPacks();
  expect(loadModelPack(padded).vocabSize).toBe(512 + PADDING);
  expect(() => checkSameVocabulary(loadModelPack(demo.cloudPack), loadModelPack(padded))).not.toThrow();
});

test('teacher forcing a model against its padded twin: identical top-1 verdicts at every position', async () => {
  const demo = await ensureDemoPacks();
  const paragraphs = await tinyStoriesParagraphs(6);
  const forced = await teacherForcePacks(demo.cloudPack, padded, paragraphs);
  expect(forced.count).toBeGreaterThan(400);
  const right = forced.edgeCorrect.reduce((a, b) => a + b, 0);
  // The 5-layer model is right about half the time on its own training text: the verdicts carry information.
  expect(right / forced.count).toBeGreaterThan(0.3);
  expect(Array.from(forced.cloudCorrect)).toEqual(Array.from(forced.edgeCorrect));
});

test('the shim serving a padded model answers with token ids only, greedy and sampled', async () => {
  const shim = await startTestShim({ modelPack: padded });
  const client = new GrpcCloudClient({ address: shim.address });
  try {
    for (const temperature of [0, 1.5]) {
      const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `padded-${temperature}` });
      const reply = await conversation.next(new EdgeContext([1, 403]).step({ maxTokens: 16, temperature, seed: 3, stopTokenIds: [] }));
      await conversation.close();
      expect(reply.tokens).toHaveLength(16);
      expect(reply.tokens.every((id) => id < 512)).toBe(true);
    }
  } finally {
    await client.close();
    await shim.shutdown();
  }
});
